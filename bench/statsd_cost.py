#!/usr/bin/env python
"""What statsd costs a worker on noop jobs (issue 28 item 2, issue 30 item 4).

    python bench/statsd_cost.py cpu --jobs 40000 --pairs 4
    python bench/statsd_cost.py instructions --jobs 1000,5000

One ``manage.py wurk -c 10 -q bench`` (bench settings, per-job log off) drains noop
jobs with statsd off, then on (``BENCH_STATSD`` pointing at a UDP socket this script
reads, as an agent would), alternating.

**cpu**: the worker's own CPU seconds (utime + stime from ``/proc/<pid>/stat``) per
10,000 jobs, between the first fifth of the jobs and the last one, so boot is left
out. Steadier than jobs/s on a shared machine, but still moved by what else runs.

**instructions**: the instructions the whole burst worker executes
(``valgrind --tool=callgrind``), for two job counts; per job = the difference divided
by the difference in jobs, so boot and shutdown cancel out. The same binary and
inputs give nearly the same count whatever else the machine does; thread scheduling
under valgrind still moves it by a few percent. Takes about a minute per run.

Uses Redis ``--redis`` (default DB 9, flushed). Prints a markdown table; asserts nothing.
"""

from __future__ import annotations

import argparse
import glob
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import redis

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PY = sys.executable


class Sink:
    """A UDP socket that reads and drops what the worker sends (the agent's part)."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.bytes = 0
        self.stopped = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.stopped:
            try:
                self.bytes += len(self.sock.recv(65536))
            except OSError:
                pass

    def close(self) -> None:
        self.stopped = True
        self.thread.join()
        self.sock.close()


def env_for(url: str, statsd_port: int | None) -> dict:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(BENCH), str(REPO)]), DJANGO_SETTINGS_MODULE="wurk_settings",
               BENCH_REDIS_URL=url, BENCH_JOBLOG="0")
    env.pop("BENCH_STATSD", None)
    if statsd_port is not None:
        env["BENCH_STATSD"] = f"127.0.0.1:{statsd_port}"
    return env


def push(url: str, jobs: int) -> None:
    code = ("import django; django.setup(); from wurkbench.jobs import Noop\n"
            f"n = {jobs}\nwhile n > 0:\n    Noop.perform_bulk([[] for _ in range(min(n, 5000))]); n -= 5000\n")
    subprocess.run([PY, "-c", code], env=env_for(url, None), cwd=BENCH, check=True)


def completed(r: redis.Redis) -> int:
    return sum(int(v.split()[0]) for v in r.hgetall("bench:rec").values())


def cpu_run(r: redis.Redis, url: str, jobs: int, statsd_port: int | None) -> float:
    """CPU seconds per 10,000 jobs of one drain."""
    r.flushdb()
    push(url, jobs)
    worker = subprocess.Popen([PY, str(REPO / "manage.py"), "wurk", "-c", "10", "-q", "bench"], cwd=BENCH,
                              env=env_for(url, statsd_port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def cpu() -> float:
        fields = Path(f"/proc/{worker.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    try:
        deadline = time.monotonic() + 300
        while completed(r) < jobs // 5:
            if time.monotonic() > deadline or worker.poll() is not None:
                raise RuntimeError("the worker did not drain the jobs")
            time.sleep(0.005)
        cpu0, done0 = cpu(), completed(r)
        while completed(r) < jobs:
            if time.monotonic() > deadline or worker.poll() is not None:
                raise RuntimeError("the worker did not drain the jobs")
            time.sleep(0.01)
        cpu1, done1 = cpu(), completed(r)
    finally:
        worker.terminate()
        worker.wait(30)
    return (cpu1 - cpu0) / (done1 - done0) * 10_000


def instruction_run(r: redis.Redis, url: str, jobs: int, statsd_port: int | None) -> int:
    """Instructions a burst worker executes to boot, drain ``jobs`` and exit."""
    r.flushdb()
    push(url, jobs)
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}/cg.%p",
                        PY, str(REPO / "manage.py"), "wurk", "-c", "10", "-q", "bench", "--burst"],
                       cwd=BENCH, env=env_for(url, statsd_port), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=True)
        total = 0
        for name in glob.glob(f"{out}/cg.*"):
            for line in Path(name).read_text(errors="replace").splitlines():
                if line.startswith("summary:"):
                    total += int(line.split()[1])
    if completed(r) != jobs:
        raise RuntimeError(f"the burst worker ran {completed(r)} of {jobs} jobs")
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("method", choices=("cpu", "instructions"))
    ap.add_argument("--jobs", default=None, help="cpu: jobs per drain (40000); instructions: two counts (1000,5000)")
    ap.add_argument("--pairs", type=int, default=4, help="alternating off/on pairs")
    ap.add_argument("--redis", default="redis://127.0.0.1:6379/9")
    args = ap.parse_args()
    r = redis.Redis.from_url(args.redis)
    sink = Sink()
    results: dict[str, list[float]] = {"off": [], "on": []}
    try:
        for _ in range(args.pairs):
            for mode in ("off", "on"):
                port = sink.port if mode == "on" else None
                if args.method == "cpu":
                    results[mode].append(cpu_run(r, args.redis, int(args.jobs or 40000), port))
                else:
                    small, large = (int(n) for n in (args.jobs or "1000,5000").split(","))
                    per_job = (instruction_run(r, args.redis, large, port)
                               - instruction_run(r, args.redis, small, port)) / (large - small)
                    results[mode].append(per_job)
                print(f"  {mode}: {results[mode][-1]:,.3f} (load {os.getloadavg()[0]:.1f})", file=sys.stderr)
    finally:
        sink.close()
        r.flushdb()
    unit = "CPU s per 10,000 jobs" if args.method == "cpu" else "instructions per job"
    off, on = statistics.median(results["off"]), statistics.median(results["on"])
    print(f"| statsd | {unit}, median (all) |\n|---|---|")
    for mode, median in (("off", off), ("on", on)):
        print(f"| {mode} | {median:,.3f} ({', '.join(f'{v:,.3f}' for v in results[mode])}) |")
    print(f"\nstatsd on / off: {on / off:.3f}x")


if __name__ == "__main__":
    main()
