"""What this worker process is doing right now: its identity, busy threads and counters."""

from __future__ import annotations

import os
import secrets
import socket
import threading
import time
from collections.abc import Callable

from .. import payload
from ..redis import wire

# Minted once per process image; a forked child keeps it so identities stay
# computable by a parent (CORE-075).
NONCE = secrets.token_hex(6)


def hostname() -> str:
    return os.environ.get("DYNO") or socket.gethostname()


def identity() -> str:
    return f"{hostname()}:{os.getpid()}:{NONCE}"


def _base36(n: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out


_tids = threading.local()


def _forget_tids() -> None:
    # A forked child has new thread idents to hash with its new pid: start a fresh cache.
    global _tids
    _tids = threading.local()


os.register_at_fork(after_in_child=_forget_tids)


def thread_id() -> str:
    """Short per-thread id, unique inside the process (CORE-075); computed once per thread."""
    try:
        return _tids.value
    except AttributeError:
        tid = _tids.value = _base36(threading.get_ident() ^ os.getpid())
        return tid


class _ExpiredCount:
    """Jobs skipped because their ``expires_in`` passed, since the last stat flush.

    One per process, not per :class:`WorkerState`: the expiry feature reports a skip
    through the ``job_expired`` signal, which knows no worker, and whichever heartbeat
    flushes next takes the count, so two workers in one process never count a skip twice.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count = 0

    def add(self, *_args, **_kwargs) -> None:
        with self._lock:
            self._count += 1

    def take(self) -> int:
        with self._lock:
            count, self._count = self._count, 0
            return count


EXPIRED = _ExpiredCount()


class WorkerState:
    """Busy map and stat counters, shared by processors and read by the heartbeat."""

    def __init__(self) -> None:
        self.identity = identity()
        self._lock = threading.Lock()
        self._busy: dict[str, tuple[str, bytes, int]] = {}
        self.processed = 0
        self.failed = 0
        # --max-jobs: how many jobs this process may start before it recycles itself.
        self.max_jobs: int | None = None
        self.started_jobs = 0
        self.on_max_jobs: Callable[[], None] | None = None
        # When a processor last came back from a fetch (the health listener's "ready").
        self.last_fetch = time.monotonic()

    # Busy map (CORE-077): tid -> (queue, raw payload, run_at).
    def begin(self, tid: str, queue: str, raw: bytes) -> None:
        with self._lock:
            self._busy[tid] = (queue, raw, int(time.time()))
            # Job code's Redis commands let other threads run while Redis answers only
            # while there are other threads running jobs (wurk_django.redis.wire).
            wire.busy_threads = len(self._busy)

    def end(self, tid: str, failed: bool) -> None:
        with self._lock:
            self._busy.pop(tid, None)
            wire.busy_threads = len(self._busy)
            self.processed += 1
            if failed:
                self.failed += 1

    def admit(self) -> bool:
        """May this process start one more job? False once ``max_jobs`` have been started;
        the job that reaches the limit calls ``on_max_jobs`` once."""
        if self.max_jobs is None:
            return True
        with self._lock:
            if self.started_jobs >= self.max_jobs:
                return False
            self.started_jobs += 1
            reached = self.started_jobs == self.max_jobs
        if reached and self.on_max_jobs is not None:
            self.on_max_jobs()
        return True

    def started_at(self, tid: str) -> int | None:
        """When (epoch seconds) the job running on thread ``tid`` began, if one is."""
        entry = self._busy.get(tid)
        return entry[2] if entry is not None else None

    def busy_count(self) -> int:
        return len(self._busy)

    def work_snapshot(self) -> dict[str, bytes]:
        """The ``<identity>:work`` hash fields, one JSON value per busy thread."""
        with self._lock:
            items = list(self._busy.items())
        return {
            tid: payload.dumps({"queue": queue, "payload": raw.decode("utf-8", "replace"), "run_at": run_at})
            for tid, (queue, raw, run_at) in items
        }

    def take_counts(self) -> tuple[int, int]:
        """Read and zero both counters (CORE-152: reset before writing, not restored)."""
        with self._lock:
            counts = (self.processed, self.failed)
            self.processed = self.failed = 0
            return counts

    def reset(self) -> None:
        with self._lock:
            self._busy.clear()
            self.processed = self.failed = 0
        EXPIRED.take()  # a forked child counts only its own skips
        self.identity = identity()

