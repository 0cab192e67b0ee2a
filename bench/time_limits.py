#!/usr/bin/env python
"""Time limits: what they cost per job, and what Python can interrupt (measurement only).

    python bench/time_limits.py cost        # µs per noop job through Processor.process, no fetch
    python bench/time_limits.py interrupt   # how long a soft stop takes to land in each kind of code

``cost`` runs the worker's own per-job path (parse, context, job log, busy map, run,
settle, acknowledge) on noop jobs without limits and with ``time_limit`` set; run it on
another checkout (PYTHONPATH) to compare. ``interrupt`` raises the soft stop into a
thread busy in each kind of code and prints when it landed (docs/time-limits.md).
Uses Redis DB 9 unless ``BENCH_REDIS_URL`` says otherwise (never 0).
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
import sqlite3
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "wurk_settings")
os.environ.setdefault("BENCH_JOBLOG", "0")

import django  # noqa: E402

django.setup()

from wurk_django import Job, payload  # noqa: E402
from wurk_django.conf import get_config  # noqa: E402


class Empty(Job):
    def perform(self):
        pass


class _Unit:
    __slots__ = ("queue", "job", "jid")

    def __init__(self, raw: bytes) -> None:
        self.queue, self.job, self.jid = "bench", raw, None

    def acknowledge(self) -> None:
        pass

    def requeue(self) -> None:
        pass


def cost(n: int = 20000) -> None:
    from wurk_django.metrics.tracker import MetricsTracker
    from wurk_django.server.run.manager import Manager
    from wurk_django.server.run.processor import Processor
    from wurk_django.server.state import WorkerState, thread_id

    config = get_config()
    manager = Manager(config, WorkerState(), MetricsTracker(config))
    processor = Processor(manager)
    processor.tid = thread_id()
    processor.thread = threading.current_thread()
    shapes = {"no limit": {}, "time_limit=60": {"time_limit": 60},
              "soft_time_limit=30, time_limit=60": {"soft_time_limit": 30, "time_limit": 60}}
    for label, extra in shapes.items():
        raw = payload.dumps({"class": f"{__name__}.Empty", "args": [], "queue": "bench", "jid": "a" * 24,
                             "retry": True, **extra})
        units = [_Unit(raw) for _ in range(n)]
        for unit in units[: n // 10]:
            processor.process(unit)
        best = float("inf")
        for _ in range(5):
            started = time.process_time()
            for unit in units:
                processor.process(unit)
            best = min(best, (time.process_time() - started) / n)
        print(f"{best * 1e6:7.2f} µs CPU per job  {label}")


def _landing(label: str, body, arm_after: float = 0.2) -> None:
    from wurk_django.errors import SoftTimeLimitExceeded
    from wurk_django.server.stopping import async_raise

    landed: list[float] = []
    began: list[float] = []

    def run() -> None:
        began.append(time.monotonic())
        try:
            body()
            landed.append(-1.0)  # returned without seeing it: it landed after the last bytecode
        except SoftTimeLimitExceeded:
            landed.append(time.monotonic())

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    time.sleep(arm_after)
    meant = began[0] + arm_after  # the watchdog's deadline, had it been due then
    asked = time.monotonic()  # later than meant when the job's C call holds the GIL: no other thread runs
    async_raise.raise_in(thread.ident, SoftTimeLimitExceeded)
    thread.join(120)
    if not landed:
        print(f"{label:48s} not delivered within 120 s")
    elif landed[0] < 0:
        print(f"{label:48s} returned first; the exception was lost with the call's end")
    else:
        print(f"{label:48s} asking delayed {asked - meant:6.2f} s, landed {landed[0] - asked:6.2f} s after "
              f"asking: {landed[0] - meant:6.2f} s late in all")


def interrupt() -> None:
    def pure_loop() -> None:
        n = 0
        while True:
            n += 1

    def sleep() -> None:
        time.sleep(5)
        while True:
            pass

    def recv() -> None:
        a, _b = socket.socketpair()
        a.settimeout(5)
        try:
            a.recv(1)
        except TimeoutError:
            pass
        while True:
            pass

    data = b"x" * (1 << 30)

    def sha() -> None:
        hashlib.sha256(data).digest()
        while True:
            pass

    def regex() -> None:
        re.match(r"(a+)+$", "a" * 27 + "b")
        while True:
            pass

    def sqlite() -> None:
        conn = sqlite3.connect(":memory:")
        conn.execute("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 30000000) "
                     "SELECT count(*) FROM c").fetchone()
        while True:
            pass

    for label, body in (("pure-Python loop", pure_loop), ("time.sleep(5)", sleep),
                        ("socket recv, nothing arrives (5 s timeout)", recv),
                        ("hashlib.sha256 over 1 GiB", sha), ("regex (a+)+$ backtracking", regex),
                        ("sqlite3 query counting to 3e7 (a long DB query)", sqlite)):
        _landing(label, body)


if __name__ == "__main__":
    {"cost": cost, "interrupt": interrupt}[sys.argv[1] if len(sys.argv) > 1 else "cost"]()
