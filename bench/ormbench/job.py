"""The job body every system runs, and how its latency is recorded.

``touch(pk)`` reads one row with the ORM and saves it back: two queries in
autocommit. Its start-to-finish time (``perf_counter`` around the body) is
kept in-process and pushed to ``RPUSH bench:orm:lat`` in batches by the
recorder's thread, so recording adds no Redis round trip per job; the
completion itself goes through bench/peers/recorder.py like every other shape.
RQ forks a child per job, so its child writes both straight away.
"""

from __future__ import annotations

import os
import threading
import time

from peers import recorder

LAT_KEY = "bench:orm:lat"
_lock = threading.Lock()
_pending: list[str] = []
_flusher_pid = 0


def touch_row(pk: int) -> None:
    from ormbench.models import Counter

    row = Counter.objects.get(pk=pk)
    row.hits += 1
    row.touched_at = time.time()
    row.save(update_fields=["hits", "touched_at"])


def _flush_loop() -> None:
    while True:
        time.sleep(recorder.FLUSH_EVERY)
        with _lock:
            batch = _pending[:]
            del _pending[:]
        if batch:
            recorder._redis().rpush(LAT_KEY, *batch)


def _ensure_flusher() -> None:
    global _flusher_pid
    with _lock:
        if _flusher_pid == os.getpid():
            return
        _flusher_pid = os.getpid()
    threading.Thread(target=_flush_loop, name=recorder.THREAD_NAME, daemon=True).start()


def touch(pk: int) -> None:
    """The job: read and update one row, then record the completion and the body's duration."""
    start = time.perf_counter()
    touch_row(pk)
    took = time.perf_counter() - start
    if _flusher_pid != os.getpid():
        _ensure_flusher()
    with _lock:
        _pending.append(f"{took:.6f}")
    recorder.done()


def touch_forked(pk: int) -> None:
    """The same for a child that exits after one job (RQ): written before it returns."""
    start = time.perf_counter()
    touch_row(pk)
    took = time.perf_counter() - start
    recorder._redis().rpush(LAT_KEY, f"{took:.6f}")
    recorder.done_direct()
