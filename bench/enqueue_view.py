#!/usr/bin/env python
"""What one push costs a Django request (issue 30 item 1), measured with Django's test client.

    python bench/enqueue_view.py --requests 3000 --rounds 5 --redis redis://127.0.0.1:6379/9
    python bench/enqueue_view.py --loop --views none,wurk,huey,lpush ...

Three views of one URLconf, served in-process by ``django.test.Client`` (the whole
request cycle: handler, URL resolution, the view, the response; no middleware, no
socket): ``/none/`` returns an empty response, ``/wurk/`` also runs
``Noop.perform_async()``, ``/huey/`` also calls Huey's ``noop()`` (bench/peers).
The variants take turns in each round (a busy neighbour slows them alike); each
figure is the median over rounds of CPU microseconds per request (``process_time``,
this process only: the Redis server's time is not in it) and requests per second
(wall). "push cost" is a view's CPU per request minus ``/none/``'s, in the same round;
"push wall" the same for wall time per request. "in the view" times the push call
alone, inside the view (``perf_counter`` and ``thread_time`` around it): what the
push itself takes, without what it does to the rest of the request.
``/lpush/`` is one redis-py ``LPUSH`` of a job's bytes (``--views none,wurk,huey,lpush``).

``--loop`` drops the request: the same calls in a bare loop (``lpush``: one redis-py
``LPUSH`` of a job's bytes, the floor for a Python client on redis-py).

Only the given database is flushed. Asserts nothing; prints a markdown table.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/9")
    ap.add_argument("--views", default="none,wurk,huey")
    ap.add_argument("--loop", action="store_true", help="call the pushes in a loop, no request")
    args = ap.parse_args()
    os.environ.update(DJANGO_SETTINGS_MODULE="wurk_settings", BENCH_REDIS_URL=args.redis, BENCH_JOBLOG="0")

    import django
    from django.conf import settings

    settings.ROOT_URLCONF = "bench_view_urls"
    settings.ALLOWED_HOSTS = ["testserver"]
    sys.modules["bench_view_urls"] = _urlconf(args.redis)
    django.setup()
    import redis
    from django.test import Client

    client = Client()
    views = args.views.split(",")
    r = redis.Redis.from_url(args.redis)
    calls = _calls(r) if args.loop else {}
    for view in views:  # warm up: imports, connections, caches
        for _ in range(200):
            if args.loop:
                calls[view]()
            else:
                assert client.get(f"/{view}/").status_code == 200
    cpu: dict[str, list[float]] = {v: [] for v in views}
    rate: dict[str, list[float]] = {v: [] for v in views}
    inner: dict[str, list[tuple[float, float]]] = {v: [] for v in views}
    for _ in range(args.rounds):
        for view in views:
            r.flushdb()
            _INNER[view] = [0.0, 0.0, 0]
            path = f"/{view}/"
            get = (lambda _path, call=calls[view]: call()) if args.loop else client.get
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(args.requests):
                get(path)
            w1, c1 = time.perf_counter(), time.process_time()
            cpu[view].append((c1 - c0) / args.requests * 1e6)
            rate[view].append(args.requests / (w1 - w0))
            wall, thread, count = _INNER[view]
            inner[view].append((wall / count * 1e6, thread / count * 1e6) if count else (0.0, 0.0))
    r.flushdb()
    base = cpu.get("none")
    base_wall = [1e6 / x for x in rate["none"]] if "none" in rate else None
    print(f"load average {os.getloadavg()[0]:.1f}; {args.rounds} rounds x {args.requests} requests\n")
    unit = "call" if args.loop else "request"
    if args.loop:
        print(f"| call | CPU us/{unit} | {unit}s/s |")
        print("|---|---|---|")
        for view in views:
            print(f"| {view} | {statistics.median(cpu[view]):.1f} | {statistics.median(rate[view]):,.0f} |")
        return
    print("| view | CPU us/request | push cost, CPU us | push wall, us | requests/s | in the view: wall us | CPU us |")
    print("|---|---|---|---|---|---|---|")
    med = statistics.median
    for view in views:
        no_base = base is None or view == "none"
        cost = "-" if no_base else f"{med(a - b for a, b in zip(cpu[view], base, strict=True)):.1f}"
        wall = "-" if no_base else f"{med(1e6 / a - b for a, b in zip(rate[view], base_wall, strict=True)):.1f}"
        own = "- | -" if view == "none" else f"{med(w for w, _ in inner[view]):.1f} | {med(c for _, c in inner[view]):.1f}"
        print(f"| /{view}/ | {med(cpu[view]):.1f} | {cost} | {wall} | {med(rate[view]):,.0f} | {own} |")
    if "wurk" in cpu and "huey" in cpu and base is not None:
        def paired(values: list[float]) -> str:
            return f"{med(values):.2f}x ({min(values):.2f}-{max(values):.2f})"

        print("\nHuey / wurk, paired per round (medians, min-max):\n")
        print("| push cost, CPU | push wall | in the view, wall | in the view, CPU |")
        print("|---|---|---|---|")
        by_cpu = [(h - b) / (w - b) for w, h, b in zip(cpu["wurk"], cpu["huey"], base, strict=True)]
        by_wall = [(1e6 / h - b) / (1e6 / w - b) for w, h, b in zip(rate["wurk"], rate["huey"], base_wall, strict=True)]
        in_wall = [h[0] / w[0] for w, h in zip(inner["wurk"], inner["huey"], strict=True)]
        in_cpu = [h[1] / w[1] for w, h in zip(inner["wurk"], inner["huey"], strict=True)]
        print(f"| {paired(by_cpu)} | {paired(by_wall)} | {paired(in_wall)} | {paired(in_cpu)} |")


def _calls(r):
    from peers.huey_app import noop
    from wurkbench.jobs import Noop

    raw = (b'{"class":"wurkbench.jobs.Noop","args":[],"jid":"0123456789abcdef01234567","queue":"bench",'
           b'"retry":true,"created_at":1796150408791,"enqueued_at":1796150408791}')
    return {"none": lambda: None, "wurk": Noop.perform_async, "huey": noop,
            "lpush": lambda: r.lpush("queue:bench", raw)}


#: Per view: wall seconds, thread CPU seconds and count of the push calls timed inside it.
_INNER: dict[str, list] = {}


def _urlconf(redis_url: str = "redis://127.0.0.1:6379/9"):
    import types

    import redis
    from django.http import HttpResponse
    from django.urls import path

    plain = redis.Redis.from_url(redis_url)
    raw = b'{"class":"wurkbench.jobs.Noop","args":[],"jid":"0123456789abcdef01234567","queue":"bench"}'

    def none(request):
        return HttpResponse(b"")

    def timed(name, push):
        def view(request):
            c0, w0 = time.thread_time(), time.perf_counter()
            push()
            w1, c1 = time.perf_counter(), time.thread_time()
            acc = _INNER.setdefault(name, [0.0, 0.0, 0])
            acc[0] += w1 - w0
            acc[1] += c1 - c0
            acc[2] += 1
            return HttpResponse(b"")
        return view

    def wurk():
        from wurkbench.jobs import Noop

        Noop.perform_async()

    def huey():
        from peers.huey_app import noop

        noop()

    module = types.ModuleType("bench_view_urls")
    module.urlpatterns = [path("none/", none), path("wurk/", timed("wurk", wurk)), path("huey/", timed("huey", huey)),
                          path("lpush/", timed("lpush", lambda: plain.lpush("queue:bench", raw)))]
    return module


if __name__ == "__main__":
    main()
