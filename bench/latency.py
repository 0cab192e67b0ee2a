#!/usr/bin/env python
"""Latency benchmark: pickup latency and scheduled-job lateness, wurk_django against Ruby Sidekiq.

    python bench/latency.py --redis redis://127.0.0.1:6379/13
    python bench/latency.py --only pickup --samples 300
    python bench/latency.py --only scheduled --scheduled-jobs 10000

**Pickup**: one worker (10 threads, or 2 with one kept busy: "one free
thread") waits idle; the driver pushes one job at a time, 20-40 ms apart,
each carrying its push time, and the job records ``now - sent`` when
``perform`` starts. Queue setups: ``-q default``; ``-q a -q b -q c`` (strict)
and ``-q a,3 -q b,2 -q c,1`` (weighted), jobs on ``c``. wurk_django jobs are
pushed by its client (which sends the wake-up); Sidekiq's by the same two
commands its client sends (``SADD queues`` + ``LPUSH``); the row "wurk, Ruby
push" pushes wurk jobs that way too (no wake-up: what a Sidekiq client
sharing the queues costs a wurk worker).

**Scheduled**: after the workers have booted and passed their first poll,
N jobs are scheduled at once, due at random over 1-5 s; each records
``now - due`` when it starts. 1 process and 10 processes. wurk_django jobs
go through ``push_bulk`` with ``at``; Sidekiq's are ``ZADD schedule`` as its
client writes them.

Uses one Redis logical database (never 0), flushed before each measurement
and at the end. Prints a markdown table; no figure is asserted anywhere.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import latency_proxy
import redis
from run import base_env  # bench/ is this script's folder, first on sys.path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PY = sys.executable
OUT = Path(os.environ.get("BENCH_OUT", "/tmp/wurk-bench"))
SETUPS = {
    "one queue": (["default"], "default"),
    "strict a, b, c; job on c": (["a", "b", "c"], "c"),
    "weighted a,3 b,2 c,1; job on c": (["a,3", "b,2", "c,1"], "c"),
}


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def env_for(url: str, extra: dict | None = None) -> dict:
    """bench/run.py's worker environment, plus Sidekiq's ``REDIS_URL``; no per-job log lines."""
    return base_env(url, {"REDIS_URL": url, "BENCH_JOBLOG": "0", **(extra or {})})


def start(system: str, queues: list[str], url: str, concurrency: int, processes: int, tag: str) -> list[subprocess.Popen]:
    OUT.mkdir(parents=True, exist_ok=True)
    out = open(OUT / f"latency-{system}-{tag}.log", "ab")
    qargs = [a for q in queues for a in ("-q", q)]
    procs = []
    if system == "wurk":
        cmd = [PY, str(REPO / "manage.py"), "wurk", "-c", str(concurrency), *qargs]
        if processes > 1:
            cmd += ["--processes", str(processes)]
        procs.append(subprocess.Popen(cmd, env=env_for(url), cwd=BENCH, stdout=out, stderr=subprocess.STDOUT,
                                      start_new_session=True))
    else:
        for _ in range(processes):
            cmd = ["sidekiq", "-r", str(BENCH / "peers" / "sidekiq_jobs.rb"), "-c", str(concurrency), *qargs]
            procs.append(subprocess.Popen(cmd, env=env_for(url), cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True))
    out.close()
    return procs


def stop(procs: list[subprocess.Popen]) -> None:
    import signal

    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(5)


def wait_ready(r: redis.Redis, processes: int, timeout: float = 60) -> None:
    """Until `processes` identities have a heartbeat (wurk and Sidekiq both write them)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        live = [p for p in r.smembers("processes") if r.hget(p, "beat")]
        if len(live) >= processes:
            return
        time.sleep(0.1)
    raise RuntimeError(f"workers did not report ready within {timeout}s")


def sidekiq_body(klass: str, args: list, queue: str, **extra) -> bytes:
    now = time.time()
    return json.dumps({"class": klass, "args": args, "retry": True, "queue": queue, "jid": uuid.uuid4().hex[:24],
                       "created_at": now, "enqueued_at": now, **extra}).encode()


def ruby_push(r: redis.Redis, klass: str, args: list, queue: str) -> None:
    """What Sidekiq's client sends for one job: SADD queues + LPUSH (no wake-up)."""
    body = sidekiq_body(klass, args, queue)
    pipe = r.pipeline(transaction=True)
    pipe.sadd("queues", queue)
    pipe.lpush(f"queue:{queue}", body)
    pipe.execute()


def wurk_client():
    sys.path[:0] = [str(BENCH), str(REPO)]
    os.environ["DJANGO_SETTINGS_MODULE"] = "wurk_settings"
    import django

    django.setup()
    from wurk_django.client.push import Client

    return Client()


def percentiles(values: list[float]) -> dict:
    values = sorted(values)
    if not values:
        return {}

    def pick(q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))]

    return {"n": len(values), "p50": pick(0.50), "p99": pick(0.99), "max": values[-1],
            "mean": statistics.fmean(values)}


def pickup(r: redis.Redis, url: str, system: str, setup: str, samples: int, free_thread: bool,
           ruby_style: bool, pusher: redis.Redis | None = None) -> dict:
    """Pickup latency percentiles. ``r`` is the driver's own connection (flush, polling);
    ``pusher`` (default ``r``) sends the Ruby-style pushes, on ``url``'s path like the workers."""
    pusher = pusher or r
    queues, target = SETUPS[setup]
    r.flushdb()
    concurrency = 2 if free_thread else 10
    procs = start(system, queues, url, concurrency, 1, f"pickup-{target}")
    try:
        wait_ready(r, 1)
        time.sleep(1.0)
        if free_thread:  # occupy one thread for the whole measurement
            hold_queue = queues[0].split(",")[0]
            if system == "wurk":
                wurk_client().push({"class": "wurkbench.jobs.Hold", "args": [600], "queue": hold_queue})
            else:
                ruby_push(pusher, "HoldJob", [600], hold_queue)
            time.sleep(0.5)
        client = wurk_client() if system == "wurk" and not ruby_style else None
        klass = "wurkbench.jobs.Pickup" if system == "wurk" else "PickupJob"
        for i in range(samples):
            time.sleep(random.uniform(0.02, 0.04))
            if client is not None:
                client.push({"class": klass, "args": [time.time()], "queue": target})
            else:
                ruby_push(pusher, klass, [time.time()], target)
            deadline = time.monotonic() + 10
            while r.llen("bench:lat") <= i:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{system}: sample {i} was not picked up within 10 s")
                time.sleep(0.0005)
        lat = [float(x) * 1000 for x in r.lrange("bench:lat", 0, -1)]
    finally:
        stop(procs)
    return percentiles(lat)


def scheduled(r: redis.Redis, url: str, system: str, processes: int, jobs: int, settle: float,
              pusher: redis.Redis | None = None) -> dict:
    pusher = pusher or r
    r.flushdb()
    procs = start(system, ["default"], url, 10 if processes == 1 else 2, processes, f"scheduled-p{processes}")
    try:
        wait_ready(r, processes, timeout=120)
        time.sleep(settle)  # past each poller's first sweep (10-15 s in both systems)
        now = time.time()
        dues = [now + random.uniform(1, 5) for _ in range(jobs)]
        if system == "wurk":
            client = wurk_client()
            for i in range(0, jobs, 1000):
                chunk = dues[i:i + 1000]
                client.push_bulk({"class": "wurkbench.jobs.Due", "args": [[d] for d in chunk], "at": chunk})
        else:
            pipe = pusher.pipeline(transaction=False)
            for due in dues:
                pipe.zadd("schedule", {sidekiq_body("DueJob", [due], "default", at=due): due})
            pipe.execute()
        pushed = time.time() - now
        deadline = time.monotonic() + 120
        while r.llen("bench:late") < jobs and time.monotonic() < deadline:
            time.sleep(0.05)
        late = [float(x) for x in r.lrange("bench:late", 0, -1)]
    finally:
        stop(procs)
    result = percentiles(late)
    result["push_s"] = pushed
    result["missing"] = jobs - len(late)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/9")
    ap.add_argument("--systems", default="wurk,sidekiq")
    ap.add_argument("--only", choices=("pickup", "scheduled"), action="append")
    ap.add_argument("--samples", type=int, default=200)
    ap.add_argument("--scheduled-jobs", type=int, default=10000)
    ap.add_argument("--settle", type=float, default=16.0, help="seconds after boot before scheduling")
    ap.add_argument("--processes", default="1,10", help="process counts for the scheduled measurement")
    ap.add_argument("--latency-ms", type=float, default=0.0,
                    help="workers and pushers reach Redis through bench/latency_proxy.py, each reply this many ms "
                         "late (the driver's polling stays direct)")
    ap.add_argument("--proxy-procs", type=int, default=1)
    args = ap.parse_args()
    db = args.redis.rstrip("/").rsplit("/", 1)[-1]
    if not db.isdigit() or int(db) == 0:
        ap.error("--redis must name a logical database other than 0 (it is flushed)")
    systems = [s for s in args.systems.split(",") if s == "wurk" or shutil.which("sidekiq")]
    only = set(args.only or ("pickup", "scheduled"))
    r = redis.Redis.from_url(args.redis)
    url, proxy = args.redis, None
    if args.latency_ms > 0:
        proxy, url = latency_proxy.spawn(args.redis, args.latency_ms, args.proxy_procs,
                                         log_path=OUT / "latency-proxy.log")
    os.environ["BENCH_REDIS_URL"] = url  # this process's wurk_django client pushes there too
    pusher = redis.Redis.from_url(url)
    load = os.getloadavg()
    lines = [f"## Latency {time.strftime('%Y-%m-%d %H:%M:%S')} (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})",
             ""]
    if proxy is not None:
        ping, direct = latency_proxy.ping_ms(url), latency_proxy.ping_ms(args.redis)
        lines += [f"Workers and pushers behind bench/latency_proxy.py, {args.latency_ms} ms added to each reply: "
                  f"a PING's round trip p50 {ping['p50']:.2f} ms, p99 {ping['p99']:.2f} ms through it "
                  f"(direct p50 {direct['p50']:.3f} ms).", ""]
    try:
        if "pickup" in only:
            lines += ["### Pickup latency, ms from push to perform (idle worker)", "",
                      "| system | setup | threads | p50 | p99 | max | n |", "|---|---|---|---|---|---|---|"]
            rows = []
            for setup in SETUPS:
                for free in (False, True):
                    for system in systems:
                        variants = [False, True] if system == "wurk" and setup != "one queue" and not free else [False]
                        for ruby_style in variants:
                            res = pickup(r, url, system, setup, args.samples, free, ruby_style, pusher)
                            name = "wurk, Ruby push" if ruby_style else system
                            threads = "2, one busy" if free else "10"
                            rows.append((name, setup, threads, res))
                            log(f"pickup {name:16} {setup:32} {threads:11} {res}")
                            lines.append(f"| {name} | {setup} | {threads} | {res.get('p50', 0):.1f} | "
                                         f"{res.get('p99', 0):.1f} | {res.get('max', 0):.1f} | {res.get('n', 0)} |")
            lines.append("")
        if "scheduled" in only:
            lines += [f"### Scheduled jobs: seconds past due ({args.scheduled_jobs} jobs due over 1-5 s)", "",
                      "| system | processes | p50 | p99 | max | missing | push s |", "|---|---|---|---|---|---|---|"]
            for processes in [int(p) for p in args.processes.split(",")]:
                for system in systems:
                    res = scheduled(r, url, system, processes, args.scheduled_jobs, args.settle, pusher)
                    log(f"scheduled {system:8} p{processes} {res}")
                    lines.append(f"| {system} | {processes} | {res.get('p50', 0):.2f} | {res.get('p99', 0):.2f} | "
                                 f"{res.get('max', 0):.2f} | {res['missing']} | {res['push_s']:.2f} |")
            lines.append("")
    finally:
        r.flushdb()
        if proxy is not None:
            latency_proxy.stop(proxy)
    load = os.getloadavg()
    lines.append(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
