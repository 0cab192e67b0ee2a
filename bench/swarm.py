#!/usr/bin/env python
"""Swarm benchmark: one worker process against a swarm of two, side by side (ENT-701, RUN-801).

    python bench/swarm.py                       # noop + cpu, 3 paired runs, 20 000 jobs
    python bench/swarm.py --jobs 5000 --runs 1  # quick look
    WURK_BENCH_REDIS_URL=redis://127.0.0.1:6379/10 python bench/swarm.py

Python threads share one core (the GIL), so one process tops out at one
core however many threads it runs; a swarm forks one worker per core. For
each shape, every run measures ``--processes 1`` and ``--processes 2``
(both ``-c 10``) back to back and prints the paired ratio:

* **noop**: jobs that do nothing — the fetch/ACK/bookkeeping path;
* **cpu**: jobs that run a fixed pure-Python loop (~10 ms of one core) —
  where the GIL shows most.

Throughput is the steady-state drain rate: ``LLEN`` of the queue sampled
every 20 ms, from 10 % to 90 % drained, so boot and tail do not count. Over
the same window it reports CPU use (100 % = one core) of the worker
processes and of redis-server: on a 2-core machine Redis shares the cores
with the workers, which bounds what a second process can add. ``--commands``
adds Redis's CPU per job and the commands it ran per job (``INFO
commandstats`` diffed over the same window), the server's share of a job.
"Boot to first job" times ``manage.py wurk`` from exec to the first job run.

Uses one Redis logical database (default 10; never 0), which it flushes
before and after. The worker runs with ``DJANGO_SETTINGS_MODULE=tests.settings``
and imports these jobs from ``bench.swarm``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
QUEUE = "swarmbench"
CPU_ITERATIONS = 30_000  # about 10 ms of one core for CPython 3.12 on this class of machine
TICK = os.sysconf("SC_CLK_TCK")

try:  # imported by the worker (DJANGO_SETTINGS_MODULE set, Django ready): define the jobs
    from wurk_django import Job

    class Noop(Job):
        queue = QUEUE
        retry = False

        def perform(self) -> None:
            pass

    class Cpu(Job):
        queue = QUEUE
        retry = False

        def perform(self) -> None:
            # Fixed work, not a wall-clock spin: with ten threads sharing the GIL
            # a timed spin would end early while other threads hold the lock.
            n = 0
            for i in range(CPU_ITERATIONS):
                n += i * i

    class First(Job):
        queue = QUEUE
        retry = False

        def perform(self) -> None:
            from wurk_django.redis.connection import get_redis

            get_redis().set("swarmbench:first", repr(time.time()), nx=True)
except Exception:  # run as a script before Django is configured: the driver needs no jobs
    pass


def _client(url: str):
    import redis

    client = redis.Redis.from_url(url)
    if int(client.connection_pool.connection_kwargs.get("db", 0)) == 0:
        sys.exit(f"refusing to use Redis database 0 ({url}); pick a dedicated one")
    return client


def _payload(cls: str) -> bytes:
    now = time.time()
    return json.dumps({"class": f"bench.swarm.{cls}", "args": [], "queue": QUEUE, "retry": False,
                       "jid": uuid.uuid4().hex[:24], "created_at": now, "enqueued_at": now},
                      separators=(",", ":")).encode()


def _fill(r, cls: str, n: int) -> None:
    pipe = r.pipeline(transaction=False)
    batch = [_payload(cls) for _ in range(n)]
    for i in range(0, n, 1000):
        pipe.lpush(f"queue:{QUEUE}", *batch[i:i + 1000])
    pipe.sadd("queues", QUEUE)
    pipe.execute()


def _start(url: str, processes: int, concurrency: int) -> subprocess.Popen:
    extra = {"QUEUES": [QUEUE], "IMPORT_ON_MISS": ["bench", "tests"], "SKIP_DEFAULT_JOB_LOGGING": True}
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "WURK_TEST_REDIS_URL": url,
           "WURK_TEST_EXTRA": json.dumps(extra), "PYTHONUNBUFFERED": "1"}
    args = [sys.executable, str(ROOT / "manage.py"), "wurk", "-c", str(concurrency)]
    if processes:
        args += ["--processes", str(processes)]
    return subprocess.Popen(args, cwd=str(ROOT), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _tree_cpu(root: int) -> dict[int, float]:
    """CPU seconds used so far by ``root`` and its children, per pid."""
    out: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        if pid == root or int(fields[1]) == root:
            out[pid] = (int(fields[11]) + int(fields[12])) / TICK
    return out


def _redis_cpu(r) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _commandstats(r) -> dict[str, tuple[int, int]]:
    """Cumulative (calls, usec) per command since the server started (or its last RESETSTAT)."""
    return {name.removeprefix("cmdstat_"): (int(v["calls"]), int(v["usec"]))
            for name, v in r.info("commandstats").items()}


def _commands_per_job(before: dict, after: dict, jobs: float) -> str:
    """Commands Redis ran per job over the window, and its time in each: the server's
    share of a job, by command (``INFO commandstats`` diffed; no RESETSTAT)."""
    rows = []
    for name, (calls, usec) in after.items():
        calls -= before.get(name, (0, 0))[0]
        usec -= before.get(name, (0, 0))[1]
        if calls / jobs >= 0.01:
            rows.append((usec, f"{name} {calls / jobs:.2f}/job x {usec / max(calls, 1):.2f} us"))
    return ", ".join(text for _, text in sorted(rows, reverse=True))


class Drain(NamedTuple):
    rate: float  # jobs/s
    worker_cpu: float  # % of one core, all worker processes
    redis_cpu: float  # % of one core
    commands: str  # what Redis ran per job, by command


def drain_rate(url: str, shape: str, n: int, processes: int, concurrency: int) -> Drain:
    """Jobs per second between 10 % and 90 % drained, with worker and Redis CPU % over that
    window and the commands Redis ran per job."""
    r = _client(url)
    r.flushdb()
    _fill(r, shape, n)
    proc = _start(url, processes, concurrency)
    key = f"queue:{QUEUE}"
    hi, lo = n * 0.9, n * 0.1
    t_hi = t_lo = None
    len_hi = len_lo = 0
    deadline = time.monotonic() + 600
    try:
        while time.monotonic() < deadline:
            length = r.llen(key)
            now = time.perf_counter()
            if t_hi is None and length <= hi:
                t_hi, len_hi = now, length
                cpu_hi, redis_hi, stats_hi = _tree_cpu(proc.pid), _redis_cpu(r), _commandstats(r)
            if length <= lo:
                t_lo, len_lo = now, length
                cpu_lo, redis_lo, stats_lo = _tree_cpu(proc.pid), _redis_cpu(r), _commandstats(r)
                break
            time.sleep(0.02)
    finally:
        _stop(proc)
        r.flushdb()
    if t_hi is None or t_lo is None or t_lo <= t_hi:
        raise RuntimeError(f"{shape} with {processes} process(es) did not drain")
    window = t_lo - t_hi
    worker_cpu = sum(cpu_lo[pid] - cpu_hi[pid] for pid in cpu_lo if pid in cpu_hi)
    return Drain((len_hi - len_lo) / window, 100 * worker_cpu / window, 100 * (redis_lo - redis_hi) / window,
                 _commands_per_job(stats_hi, stats_lo, len_hi - len_lo))


def boot_to_first_job(url: str, processes: int, concurrency: int) -> float:
    """Seconds from starting ``manage.py wurk`` to the first job running."""
    r = _client(url)
    r.flushdb()
    _fill(r, "First", 1)
    started = time.time()
    proc = _start(url, processes, concurrency)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            first = r.get("swarmbench:first")
            if first:
                return float(first) - started
            time.sleep(0.005)
        raise RuntimeError("no job ran within 60 s")
    finally:
        _stop(proc)
        r.flushdb()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, default=20_000, help="noop jobs per measurement (cpu: a twentieth)")
    ap.add_argument("--runs", type=int, default=3, help="paired runs per shape")
    ap.add_argument("--concurrency", type=int, default=10)
    ap.add_argument("--shapes", default="noop,cpu")
    ap.add_argument("--redis", default=os.environ.get("WURK_BENCH_REDIS_URL", "redis://127.0.0.1:6379/10"))
    ap.add_argument("--commands", action="store_true",
                    help="also print Redis's CPU per job and the commands it ran per job (INFO commandstats)")
    args = ap.parse_args()

    print(f"swarm benchmark: {platform.python_implementation()} {platform.python_version()}, "
          f"{os.cpu_count()} CPUs, {args.runs} paired run(s), -c {args.concurrency}, Redis {args.redis}, "
          f"load average {os.getloadavg()[0]:.2f} (other work on the machine skews every figure)")
    for shape in args.shapes.split(","):
        n = args.jobs if shape == "noop" else max(args.jobs // 20, 400)
        cls = {"noop": "Noop", "cpu": "Cpu"}[shape]
        ones, twos, ratios = [], [], []
        for run in range(args.runs):
            one, cpu1, redis1, commands1 = drain_rate(args.redis, cls, n, 1, args.concurrency)
            two, cpu2, redis2, commands2 = drain_rate(args.redis, cls, n, 2, args.concurrency)
            ones.append(one)
            twos.append(two)
            ratios.append(two / one)
            # jobs per worker CPU-second: equal on both sides means the swarm scales with the
            # cores it is given, whatever else the machine is busy with.
            print(f"  {shape:5} run {run + 1}: 1 process {one:8,.0f} jobs/s (worker {cpu1:3.0f}% CPU, "
                  f"{100 * one / max(cpu1, 1):6,.0f}/CPU-s, redis {redis1:3.0f}%)   2 processes {two:8,.0f} jobs/s "
                  f"(workers {cpu2:3.0f}%, {100 * two / max(cpu2, 1):6,.0f}/CPU-s, redis {redis2:3.0f}%)"
                  f"   ratio {two / one:.2f}x")
            if args.commands:
                # Redis's CPU per job (us): what bounds the ratio when the workers and Redis share the cores.
                print(f"      redis per job: 1 process {1e4 * redis1 / one:.2f} us CPU ({commands1}); "
                      f"2 processes {1e4 * redis2 / two:.2f} us CPU ({commands2})")
        print(f"{shape:5} median: 1 process {statistics.median(ones):8,.0f} jobs/s   "
              f"2 processes {statistics.median(twos):8,.0f} jobs/s   ratio {statistics.median(ratios):.2f}x "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f})")
    standalone, swarm1, swarm2 = [], [], []
    for _ in range(args.runs):
        standalone.append(boot_to_first_job(args.redis, 0, args.concurrency))
        swarm1.append(boot_to_first_job(args.redis, 1, args.concurrency))
        swarm2.append(boot_to_first_job(args.redis, 2, args.concurrency))
    print(f"boot to first job (median): standalone {statistics.median(standalone) * 1000:.0f} ms, "
          f"--processes 1 {statistics.median(swarm1) * 1000:.0f} ms, "
          f"--processes 2 {statistics.median(swarm2) * 1000:.0f} ms "
          f"(swarm/standalone {statistics.median(swarm2) / statistics.median(standalone):.2f}x)")


if __name__ == "__main__":
    main()
