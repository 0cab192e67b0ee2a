#!/usr/bin/env python
"""Scale-out (issue 30 item 6): Redis CPU per job at 1, 2 and 4 worker processes, on one
Redis or split over two shards.

    python bench/scaleout.py --processes 1,2,4 --shards 1,2 --jobs 20000 --runs 3

Every measurement runs on private ``redis-server``s this script starts (``--port`` and the
ports after it, one per shard; no persistence) and stops by pid, so nothing else on the
machine touches their counters. Per measurement: flush, stage ``--jobs`` noop jobs in a
side list (hand-built payloads, one ``LPUSH`` per 1,000; with two shards half on each),
start the worker processes (``manage.py wurk -c 10``, per-job log off; with two shards half
of them on each server, as ``manage.py wurk --shard`` would run them) and wait until each
has beaten, read ``INFO cpu`` of every server, ``RENAME`` the side list to the queue (one
command: the enqueue's cost stays out), wait until the jobs have all run
(bench/peers/recorder.py counts them, one ``HSET`` per process every 50 ms), read ``INFO
cpu`` again, stop the workers.

Reported: jobs/s (first to last completion, as the jobs record them); Redis CPU per job
(the servers' ``used_cpu_sys + used_cpu_user`` of the main thread, from the ``RENAME`` to
the last job, divided by the jobs; the idle beats of the window are in it, well under a
millisecond); the busiest server's main thread CPU as a share
of one core over the drain; and the jobs/s one Redis core would carry at that cost
(1 / CPU per job). Worker throughput on a shared 2-core machine is bounded by the workers'
own CPU, not by Redis: the cost per job is the figure that carries over.

First, the same cost for the push side: ``Noop.perform_async()`` one at a time, and
``Noop.perform_bulk`` in batches of 1,000, from one process (its ``django.setup()`` is in the
window: a few commands). A job costs Redis its push plus its run.

Prints a markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pickup import BENCH, OUT, PY, REPO, Server, env_for, log, stop_workers, wait_ready  # noqa: E402

STAGE = "bench:stage"


def fill(r: redis.Redis, n: int) -> None:
    """``n`` noop jobs into a staging list; one ``RENAME`` makes them the queue."""
    ms = int(time.time() * 1000)
    base = {"class": "wurkbench.jobs.Noop", "args": [], "retry": True, "queue": "bench",
            "created_at": ms, "enqueued_at": ms}
    bodies = [json.dumps({**base, "jid": uuid.uuid4().hex[:24]}, separators=(",", ":")).encode() for _ in range(n)]
    pipe = r.pipeline(transaction=False)
    pipe.sadd("queues", "bench")
    for i in range(0, n, 1000):
        pipe.lpush(STAGE, *bodies[i:i + 1000])
    pipe.execute()


def cpu(r: redis.Redis) -> float:
    info = r.info("cpu")
    return float(info["used_cpu_sys_main_thread"]) + float(info["used_cpu_user_main_thread"])


def recorded(r: redis.Redis) -> tuple[int, float, float]:
    count, first, last = 0, float("inf"), 0.0
    for value in r.hgetall("bench:rec").values():
        c, f, la = value.split()
        count += int(c)
        first, last = min(first, float(f)), max(last, float(la))
    return count, first, last


def start(url: str, processes: int) -> list[subprocess.Popen]:
    OUT.mkdir(parents=True, exist_ok=True)
    out = open(OUT / "scaleout-wurk.log", "ab")
    procs = [subprocess.Popen([PY, str(REPO / "manage.py"), "wurk", "-c", "10", "-q", "bench"],
                              env=env_for(url), cwd=BENCH, stdout=out, stderr=subprocess.STDOUT,
                              start_new_session=True) for _ in range(processes)]
    out.close()
    return procs


def measure(servers: list[Server], processes: int, jobs: int, timeout: float = 600) -> dict:
    shards = len(servers)
    share = jobs // shards
    for s in servers:
        s.client.flushall()
        fill(s.client, share)
    procs: list[subprocess.Popen] = []
    try:
        counts = [processes // shards + (1 if i < processes % shards else 0) for i in range(shards)]
        for s, n in zip(servers, counts, strict=True):
            procs += start(s.url, n)
        for s, n in zip(servers, counts, strict=True):
            wait_ready(s.client, n)
        time.sleep(1.0)  # past the boot's first beats and walks
        before = [cpu(s.client) for s in servers]
        for s in servers:
            s.client.rename(STAGE, "queue:bench")
        deadline = time.monotonic() + timeout
        while True:
            states = [recorded(s.client) for s in servers]
            if all(c >= share for c, _, _ in states):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"not drained in {timeout}s: {states}")
            time.sleep(0.05)
        after = [cpu(s.client) for s in servers]
    finally:
        stop_workers(procs)
    first = min(f for _, f, _ in states)
    last = max(la for _, _, la in states)
    spent = [a - b for a, b in zip(after, before, strict=True)]
    per_job = sum(spent) / (share * shards)
    busiest = max(spent[i] / max(states[i][2] - states[i][1], 1e-9) for i in range(shards))
    return {"jobs_s": share * shards / (last - first), "us_per_job": per_job * 1e6, "busiest_core": busiest,
            "per_core": 1 / per_job if per_job else float("inf")}


PUSH_CODE = {
    "one at a time": "for _ in range(N): Noop.perform_async()",
    "bulk of 1,000": "for _ in range(N // 1000): Noop.perform_bulk([[] for _ in range(1000)])",
}


def push_cost(server: Server, jobs: int, how: str) -> float:
    """Redis CPU (main thread) per job pushed through wurk_django's client, in microseconds."""
    server.client.flushall()
    code = f"import django\ndjango.setup()\nfrom wurkbench.jobs import Noop\nN = {jobs}\n{PUSH_CODE[how]}"
    before = cpu(server.client)
    subprocess.run([PY, "-c", code], env=env_for(server.url), cwd=BENCH, check=True, capture_output=True)
    return (cpu(server.client) - before) / jobs * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=7463, help="the first shard's port; the next on port + 1...")
    ap.add_argument("--processes", default="1,2,4")
    ap.add_argument("--shards", default="1,2")
    ap.add_argument("--jobs", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    most = max(int(s) for s in args.shards.split(","))
    servers = [Server(args.port + i) for i in range(most)]
    load = os.getloadavg()
    print(f"## bench/scaleout.py {time.strftime('%Y-%m-%d %H:%M:%S')} (load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}), {args.jobs} noop jobs, -c 10 per process, "
          f"medians of {args.runs}\n")
    print("| shards | processes | jobs/s | Redis CPU per job, us (main threads, all shards) | busiest Redis main "
          "thread, share of a core | jobs/s one Redis core carries at that cost |\n|---|---|---|---|---|---|",
          flush=True)
    try:
        for how in PUSH_CODE:
            costs = [push_cost(servers[0], args.jobs, how) for _ in range(args.runs)]
            log(f"push {how}: {costs}")
            print(f"| push, {how} | - | - | {statistics.median(costs):.1f} | - | "
                  f"{1e6 / statistics.median(costs):,.0f} |", flush=True)
        for shards in (int(s) for s in args.shards.split(",")):
            for processes in (int(p) for p in args.processes.split(",")):
                if processes < shards:
                    continue
                results = []
                for run in range(args.runs):
                    res = measure(servers[:shards], processes, args.jobs)
                    log(f"shards {shards} processes {processes} run {run}: {res}")
                    results.append(res)
                med = {k: statistics.median(r[k] for r in results) for k in results[0]}
                print(f"| {shards} | {processes} | {med['jobs_s']:,.0f} | {med['us_per_job']:.1f} | "
                      f"{med['busiest_core']:.0%} | {med['per_core']:,.0f} |", flush=True)
    finally:
        for s in servers:
            s.stop()


if __name__ == "__main__":
    main()
