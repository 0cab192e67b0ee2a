"""Completion recorder shared by every Python system under test.

A job calls :func:`done` when it finishes. The timestamp is taken in-process
under a lock (so ``first``/``last`` are exact) and a background thread writes
``count first last`` for this process to ``HSET bench:rec <pid>`` every 50 ms,
so the recorder costs no Redis round trip per job. Fork-per-job systems (RQ)
use :func:`done_direct`, which writes straight to Redis because the forked
child exits before a flusher could run.
"""

from __future__ import annotations

import os
import threading
import time

import redis

URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9")
FLUSH_EVERY = 0.05
THREAD_NAME = "bench-recorder"

_lock = threading.Lock()
_state = [0, 0.0, 0.0]  # count, first, last
_flusher_pid = 0
_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None or getattr(_client, "_bench_pid", None) != os.getpid():
        _client = redis.Redis.from_url(URL)
        _client._bench_pid = os.getpid()  # type: ignore[attr-defined]
    return _client


def _flush_loop() -> None:
    pid = os.getpid()
    written = -1
    extra = _extra_writer()
    while True:
        time.sleep(FLUSH_EVERY)
        with _lock:
            count, first, last = _state
        if count != written:
            _redis().hset("bench:rec", str(pid), f"{count} {first!r} {last!r}")
            written = count
        if extra is not None:
            extra(_redis(), pid)


def _extra_writer():
    """The command counter (bench/peers/cmdcount.py) rides this thread when loaded."""
    if os.environ.get("BENCH_COUNT") != "1":
        return None
    from . import cmdcount

    return cmdcount.flush


def _ensure_flusher() -> None:
    global _flusher_pid
    pid = os.getpid()
    if _flusher_pid == pid:
        return
    with _lock:
        if _flusher_pid == pid:
            return
        if _flusher_pid:  # a forked child inherits the parent's counts: start from zero
            _state[:] = [0, 0.0, 0.0]
        _flusher_pid = pid
    threading.Thread(target=_flush_loop, name=THREAD_NAME, daemon=True).start()


def done() -> None:
    if _flusher_pid != os.getpid():
        _ensure_flusher()
    with _lock:
        now = time.time()
        if not _state[0]:
            _state[1] = now
        _state[0] += 1
        _state[2] = now


def done_direct() -> None:
    """One pipeline per job: count, and first/last as sorted-set scores (LT/GT keep the extremes)."""
    now = time.time()
    pipe = _redis().pipeline(transaction=False)
    pipe.incr("bench:direct:count")
    pipe.zadd("bench:direct:ts", {"first": now}, lt=True)
    pipe.zadd("bench:direct:ts", {"last": now}, gt=True)
    pipe.execute()


def redis_call() -> None:
    """The redis shape: one Redis round trip of the job's own (an INCR), as real jobs make."""
    _redis().incr("bench:calls")


def record_latency(seconds: float, key: str = "bench:lat") -> None:
    """Latency shapes (bench/latency.py): measured before this call, written straight away."""
    _redis().rpush(key, repr(seconds))


CPU_ITERATIONS = int(os.environ.get("BENCH_CPU_ITERATIONS", "20000"))
IO_SECONDS = 0.005


def cpu_work() -> int:
    """The cpu shape: a fixed arithmetic loop that holds the GIL (RUN-707: 20 000 iterations)."""
    x = 0
    for i in range(CPU_ITERATIONS):
        x += i * i % 7
    return x
