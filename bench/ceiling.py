#!/usr/bin/env python
"""What plain Python threads reach on this machine, with no job system (measurement only).

    python bench/ceiling.py [--jobs 600] [--runs 3]

The cpu and io targets of docs/benchmarks.md are fractions of an ideal:
one core's worth of cpu job bodies, or 10 threads x (1 / 5 ms) io jobs. This
prints how close bare threads get to that ideal when each "job" is followed
by one Redis round trip (a PING on DB 9, as a fetch would be), which is the
least any Redis-backed worker must do per job. Paired in one run, alternating.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import redis  # noqa: E402
from peers.recorder import IO_SECONDS, cpu_work  # noqa: E402

URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")


def drain(jobs: int, threads: int, body, round_trip: bool) -> float:
    per = jobs // threads

    def work() -> None:
        client = redis.Redis.from_url(URL)
        for _ in range(per):
            body()
            if round_trip:
                client.ping()
        client.close()

    pool = [threading.Thread(target=work) for _ in range(threads)]
    started = time.perf_counter()
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    return per * threads / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=600)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()

    def sleep() -> None:
        time.sleep(IO_SECONDS)

    shared = redis.Redis.from_url(URL)  # one client for all threads, as a job's get_redis() would be

    def incr() -> None:
        shared.incr("bench:calls")

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from wurk_django import redis_client
    from wurk_django.conf import Config

    app = redis_client(config=Config(raw={"REDIS_URL": URL}))

    def app_incr() -> None:
        app.incr("bench:calls")

    cases = [
        ("cpu, 1 thread, no Redis (one core)", 1, cpu_work, False),
        ("cpu, 10 threads, no Redis", 10, cpu_work, False),
        ("cpu, 10 threads, 1 round trip per job", 10, cpu_work, True),
        ("io, 10 threads, no Redis", 10, sleep, False),
        ("io, 10 threads, 1 round trip per job", 10, sleep, True),
        ("redis shape, 10 threads, the job's own INCR only (no job system at all)", 10, incr, False),
        ("redis shape, 10 threads, the same INCR through wurk_django.redis_client()", 10, app_incr, False),
    ]
    results: dict[str, list[float]] = {label: [] for label, *_ in cases}
    for _ in range(args.runs):
        for label, threads, body, round_trip in cases:
            results[label].append(drain(args.jobs, threads, body, round_trip))
    one_core = statistics.median(results[cases[0][0]])
    print(f"python {sys.version.split()[0]}, {args.jobs} jobs, {args.runs} runs, medians")
    for label, *_ in cases:
        rate = statistics.median(results[label])
        ideal = one_core if label.startswith("cpu") else 10 / IO_SECONDS if label.startswith("io") else rate
        print(f"{rate:9.0f} jobs/s  {100 * rate / ideal:5.1f} % of ideal  {label}")


if __name__ == "__main__":
    main()
