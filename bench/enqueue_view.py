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
(wall). "push cost" is a view's CPU per request minus ``/none/``'s, in the same round.

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
    sys.modules["bench_view_urls"] = _urlconf()
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
    for _ in range(args.rounds):
        for view in views:
            r.flushdb()
            path = f"/{view}/"
            get = (lambda _path, call=calls[view]: call()) if args.loop else client.get
            w0, c0 = time.perf_counter(), time.process_time()
            for _ in range(args.requests):
                get(path)
            w1, c1 = time.perf_counter(), time.process_time()
            cpu[view].append((c1 - c0) / args.requests * 1e6)
            rate[view].append(args.requests / (w1 - w0))
    r.flushdb()
    base = cpu.get("none")
    print(f"load average {os.getloadavg()[0]:.1f}; {args.rounds} rounds x {args.requests} requests\n")
    unit = "call" if args.loop else "request"
    print(f"| view | CPU us/{unit} | push cost, CPU us | {unit}s/s |")
    print("|---|---|---|---|")
    for view in views:
        cost = ("-" if base is None or view == "none" else
                f"{statistics.median(a - b for a, b in zip(cpu[view], base, strict=True)):.1f}")
        print(f"| /{view}/ | {statistics.median(cpu[view]):.1f} | {cost} | {statistics.median(rate[view]):,.0f} |")
    if "wurk" in cpu and "huey" in cpu and base is not None:
        ratios = [(h - b) / (w - b) for w, h, b in zip(cpu["wurk"], cpu["huey"], base, strict=True)]
        print(f"\nHuey's push cost / wurk's, paired per round: {statistics.median(ratios):.2f}x "
              f"({min(ratios):.2f}-{max(ratios):.2f})")


def _calls(r):
    from peers.huey_app import noop
    from wurkbench.jobs import Noop

    raw = (b'{"class":"wurkbench.jobs.Noop","args":[],"jid":"0123456789abcdef01234567","queue":"bench",'
           b'"retry":true,"created_at":1796150408791,"enqueued_at":1796150408791}')
    return {"none": lambda: None, "wurk": Noop.perform_async, "huey": noop,
            "lpush": lambda: r.lpush("queue:bench", raw)}


def _urlconf():
    import types

    from django.http import HttpResponse
    from django.urls import path

    def none(request):
        return HttpResponse(b"")

    def wurk(request):
        from wurkbench.jobs import Noop

        Noop.perform_async()
        return HttpResponse(b"")

    def huey(request):
        from peers.huey_app import noop

        noop()
        return HttpResponse(b"")

    module = types.ModuleType("bench_view_urls")
    module.urlpatterns = [path("none/", none), path("wurk/", wurk), path("huey/", huey)]
    return module


if __name__ == "__main__":
    main()
