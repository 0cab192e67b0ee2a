#!/usr/bin/env python
"""Per-job costs of the worker's hot-path pieces, single thread, in microseconds (measurement only).

    python bench/micro.py

Each line times one piece the way the worker runs it on a noop job, then the
leaner variant proposed in docs/benchmarks.md, so the expected gain of each
proposal is measured rather than guessed. Uses Redis DB 9 (flushed).
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH), str(BENCH.parent)]
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "wurk_settings")
os.environ.setdefault("BENCH_JOBLOG", "1")

import django  # noqa: E402

django.setup()

import orjson  # noqa: E402
import redis  # noqa: E402

from wurk_django import payload, signals  # noqa: E402
from wurk_django.connection import get_redis  # noqa: E402
from wurk_django.server import database  # noqa: E402
from wurk_django.server.joblog import JobLogger, PlainFormatter  # noqa: E402
from wurk_django.server.state import thread_id  # noqa: E402

N = int(os.environ.get("MICRO_N", "20000"))


def timeit(label: str, fn, n: int = N) -> float:
    for _ in range(min(n // 10, 500)):
        fn()
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    print(f"{best * 1e6:8.2f} us  {label}")
    return best


def redis_paths() -> None:
    r = get_redis()
    r.flushdb()
    body = payload.dumps({"class": "wurkbench.jobs.Noop", "args": [], "queue": "bench", "jid": "a" * 24})
    r.lpush("queue:bench", *([body] * (N * 8)))
    private = "queue:bench|host|1|n|0"

    def pipeline() -> None:  # what ReliableFetch._walk does per job today
        pipe = r.pipeline(transaction=False)
        pipe.lrem(private, 1, body)
        pipe.delete("super_fetch:recovered:" + "a" * 24)
        pipe.lmove("queue:bench", private, "RIGHT", "LEFT")
        pipe.execute()

    pool = r.connection_pool

    def raw() -> None:  # proposed: pack and send on a pooled connection, read three replies
        conn = pool.get_connection()
        try:
            conn.send_packed_command(conn.pack_commands((
                ("LREM", private, 1, body),
                ("DEL", "super_fetch:recovered:" + "a" * 24),
                ("LMOVE", "queue:bench", private, "RIGHT", "LEFT"),
            )), False)
            conn.read_response()
            conn.read_response()
            conn.read_response()
        except BaseException:
            conn.disconnect()
            raise
        finally:
            pool.release(conn)

    timeit("fetch+ACK via redis-py Pipeline (today)", pipeline)
    timeit("fetch+ACK packed on a pooled connection (proposed)", raw)
    r.flushdb()


class LeanFormatter(logging.Formatter):
    """Proposed PlainFormatter: no import per call, cached pid/tid, second-granular strftime cache."""

    _sec = -1
    _stamp = ""
    _local = threading.local()

    def format(self, record: logging.LogRecord) -> str:
        sec = int(record.created)
        if sec != self._sec:
            LeanFormatter._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
            LeanFormatter._sec = sec
        tid = getattr(self._local, "tid", None)
        if tid is None:
            tid = self._local.tid = thread_id()
        ctx = getattr(record, "wurk", None)
        fields = " ".join([f"{k}={v}" for k, v in ctx.items() if v is not None]) + " " if ctx else ""
        line = f"{self._stamp}.{int(record.msecs):03d}Z pid={_PID} tid={tid} {fields}{record.levelname}: {record.msg}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


_PID = os.getpid()


def logging_paths() -> None:
    job = {"class": "wurkbench.jobs.Noop", "args": [], "queue": "bench", "jid": "a" * 24}
    logger = logging.getLogger("wurk_django")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    sink = open(os.devnull, "w")
    handler = logging.StreamHandler(sink)
    logger.handlers[:] = [handler]
    joblog = JobLogger(["bid", "tags"], False)

    def two_lines() -> None:
        ctx = joblog.context(job)
        started = time.monotonic_ns()
        joblog.start(ctx)
        joblog.done(ctx, started)

    handler.setFormatter(PlainFormatter())
    timeit("job log start+done, PlainFormatter (today)", two_lines)
    handler.setFormatter(LeanFormatter())
    timeit("job log start+done, cached pid/tid/second stamp (proposed)", two_lines)
    logging._srcfile = None  # what logging.logMultiprocessing-style tuning does: no findCaller frame walk
    timeit("  ... and logging._srcfile = None (no caller lookup)", two_lines)
    logger.handlers[:] = []
    sink.close()


def bookkeeping_paths() -> None:
    raw = payload.dumps({"class": "wurkbench.jobs.Noop", "args": [], "queue": "bench", "jid": "a" * 24,
                         "created_at": 1, "enqueued_at": 1, "retry": True})
    timeit("orjson.loads payload", lambda: orjson.loads(raw))
    timeit("database.before_job + after_job (close_old_connections x2)",
           lambda: (database.before_job(), database.after_job()))
    timeit("signals.send x2 with no receivers", lambda: (signals.send(signals.job_started, None, job=None),
                                                           signals.send(signals.job_succeeded, None, job=None)))
    timeit("thread_id() (base36 each call)", thread_id)
    timeit("time.strftime+gmtime", lambda: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time())))


if __name__ == "__main__":
    print(f"python {sys.version.split()[0]}, redis-py {redis.__version__}, {N} iterations, best of 3")
    redis_paths()
    logging_paths()
    bookkeeping_paths()
