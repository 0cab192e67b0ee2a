#!/usr/bin/env python
"""Per-job costs of the worker's hot-path pieces, single thread, in microseconds (measurement only).

    python bench/micro.py

Each line times one piece of the per-job path as the worker runs it now, beside
what it replaced (docs/benchmarks.md), so each gain is measured rather than
guessed. Uses Redis DB 9 (flushed; ``BENCH_REDIS_URL`` picks another, never 0).
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
os.environ.setdefault("BENCH_DATABASE", "1")

import django  # noqa: E402

django.setup()

import orjson  # noqa: E402
import redis  # noqa: E402
from django.db import close_old_connections  # noqa: E402
from wurkbench.jobs import Noop  # noqa: E402

from wurk_django import payload, signals  # noqa: E402
from wurk_django.redis.connection import get_redis, send_commands, send_on  # noqa: E402
from wurk_django.server.logwriter import BatchingStreamHandler  # noqa: E402
from wurk_django.server.run import database  # noqa: E402
from wurk_django.server.run.joblog import JobLogger, PlainFormatter  # noqa: E402
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
    commands = [("LREM", private, -1, body), ("DEL", "super_fetch:recovered:" + "a" * 24),
                ("LMOVE", "queue:bench", private, "RIGHT", "LEFT")]

    def pipeline() -> None:  # before: a redis-py Pipeline object per job
        pipe = r.pipeline(transaction=False)
        pipe.lrem(private, 1, body)
        pipe.delete("super_fetch:recovered:" + "a" * 24)
        pipe.lmove("queue:bench", private, "RIGHT", "LEFT")
        pipe.execute()

    conn = r.connection_pool.get_connection()

    timeit("fetch+ACK via a redis-py Pipeline (before)", pipeline)
    timeit("fetch+ACK packed on the thread's connection (now: connection.send_on)", lambda: send_on(conn, commands))
    r.connection_pool.release(conn)
    r.flushdb()

    job = {"class": "wurkbench.jobs.Noop", "args": [], "queue": "bench", "jid": "b" * 24, "created_at": 1}

    def push_pipeline() -> None:  # before: Client._send with a Pipeline
        pipe = r.pipeline(transaction=False)
        pipe.sadd("queues", "bench")
        pipe.lpush("queue:bench", payload.dumps(job))
        pipe.execute()

    timeit("push SADD+LPUSH via a Pipeline (before)", push_pipeline)
    timeit("push SADD+LPUSH packed (now: connection.send_commands)",
           lambda: send_commands(r, [("SADD", "queues", "bench"), ("LPUSH", "queue:bench", payload.dumps(job))]))
    timeit("Noop.perform_async() end to end (now)", Noop.perform_async)
    r.flushdb()


def logging_paths() -> None:
    job = {"class": "wurkbench.jobs.Noop", "args": [], "queue": "bench", "jid": "a" * 24}
    root = logging.getLogger("wurk_django")
    root.setLevel(logging.INFO)
    root.propagate = False
    sink = open(os.devnull, "w")
    joblog = JobLogger(["bid", "tags"], False)

    def two_lines() -> None:
        ctx = joblog.context(job)
        started = time.monotonic_ns()
        joblog.start(ctx)
        joblog.done(ctx, started)

    stock = logging.StreamHandler(sink)
    stock.setFormatter(PlainFormatter())
    root.handlers[:] = [stock]
    timeit("job log start+done: stock StreamHandler, write+flush per line (before)", two_lines)
    batching = BatchingStreamHandler(sink, interval=0.1)
    batching.setFormatter(PlainFormatter())
    root.handlers[:] = [batching]
    batching.addFilter(lambda record: True)  # a filter forces the LogRecord path
    timeit("job log start+done: BatchingStreamHandler via LogRecord (any LOGGING setup)", two_lines)
    batching.filters.clear()
    timeit("job log start+done: BatchingStreamHandler, direct route (the worker's own setup)", two_lines)
    batching.close()
    root.handlers[:] = []
    sink.close()


def bookkeeping_paths() -> None:
    raw = payload.dumps({"class": "wurkbench.jobs.Noop", "args": [], "queue": "bench", "jid": "a" * 24,
                         "created_at": 1, "enqueued_at": 1, "retry": True})
    timeit("orjson.loads payload", lambda: orjson.loads(raw))
    timeit("close_old_connections() x2 (before)", lambda: (close_old_connections(), close_old_connections()))
    unset = threading.local()  # before: the thread's database mark read with getattr and a default

    def marks_by_getattr() -> None:
        if getattr(unset, "open", False):
            close_old_connections()
        if getattr(unset, "open", False):
            close_old_connections()

    timeit("database.before_job + after_job, mark read by getattr(local, name, default) (before)", marks_by_getattr)
    timeit("database.before_job + after_job, no open connection (now: the mark a class default)",
           lambda: (database.before_job(), database.after_job()))
    timeit("signals.send x2 with no receivers", lambda: (signals.send(signals.job_started, None, job=None),
                                                           signals.send(signals.job_succeeded, None, job=None)))
    timeit("thread_id() (cached per thread)", thread_id)


def middleware_paths() -> None:
    """The server chain with the built-ins registered (batch, unique, encryption) for a job
    that uses none of them: every middleware built and called (before) vs applies(job)."""
    from wurk_django.conf import get_config
    from wurk_django.middleware import Chain, server_chain

    chain = server_chain(get_config())
    job = {"class": "wurkbench.jobs.Noop", "args": [], "queue": "bench", "jid": "a" * 24}
    instance = Noop()

    def every_entry() -> None:  # before: no applies(), every entry built and called
        instances = [e.make() for e in chain._entries]

        def step(i: int):
            if i == len(instances):
                return None
            return instances[i](instance, job, "bench", lambda: step(i + 1))

        step(0)

    print(f"         server chain: {', '.join(e.klass.__name__ for e in chain._entries)}")
    timeit("server chain, plain job, every middleware called (before)", every_entry)
    timeit("server chain, plain job, applies(job) skips unused features (now)",
           lambda: chain.invoke((instance, job, "bench"), lambda: None))
    timeit("no chain at all (floor)", lambda: None)
    del Chain


if __name__ == "__main__":
    print(f"python {sys.version.split()[0]}, redis-py {redis.__version__}, {N} iterations, best of 3")
    redis_paths()
    logging_paths()
    bookkeeping_paths()
    middleware_paths()
