"""Reliable client push: jobs pushed while Redis is unreachable wait in memory (PRO-320..323).

When a push fails with a connection error or timeout, its jobs go into a
bounded, process-local buffer and a background thread delivers them, oldest
first, as soon as Redis answers again. Every later push also tries to empty
the buffer first, keeping the order. A full buffer raises
:class:`PushBufferFull` at the call site: jobs are refused loudly, never
dropped silently.

Limits, on purpose: the buffer lives in this process's memory (a crash loses
it), and a push whose reply was lost may have been applied, so a job can be
delivered twice (at-least-once). Jobs belonging to a batch (``bid``) are never
buffered.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from typing import TYPE_CHECKING

import redis as redis_lib

from .errors import WurkError

if TYPE_CHECKING:
    from .client import Client

logger = logging.getLogger("wurk_django.client")

FLUSH_INTERVAL = 2.0
TRANSIENT = (redis_lib.ConnectionError, redis_lib.TimeoutError)


class PushBufferFull(WurkError):
    """Redis is unreachable and the local push buffer is full; the jobs were not accepted."""

    def __init__(self, capacity: int, jobs: list[dict], cause: BaseException) -> None:
        jids = ", ".join(str(j.get("jid")) for j in jobs[:5])
        super().__init__(
            f"Redis is unreachable ({cause}) and the push buffer already holds its limit of "
            f"{capacity} job(s) (WURK['RELIABLE_PUSH_BUFFER']); refused job(s) {jids}"
        )
        self.jobs = jobs
        self.cause = cause


class PushBuffer:
    def __init__(self) -> None:
        self._groups: deque[list[dict]] = deque()
        self._count = 0
        self._lock = threading.Lock()
        self._flusher: threading.Thread | None = None
        self._wake = threading.Event()

    def __len__(self) -> int:
        return self._count

    def add(self, client: Client, jobs: list[dict], cause: BaseException) -> None:
        capacity = client.config.reliable_push_buffer
        with self._lock:
            if self._count + len(jobs) > capacity:
                raise PushBufferFull(capacity, jobs, cause) from cause
            first = self._count == 0
            self._groups.append(jobs)
            self._count += len(jobs)
            if self._flusher is None or not self._flusher.is_alive():
                self._flusher = threading.Thread(target=self._run, args=(client,), name="wurk-push-buffer",
                                                 daemon=True)
                self._flusher.start()
        if first:
            logger.warning("Redis unreachable (%s): buffering pushes locally (up to %d jobs)", cause, capacity)

    def drain(self, client: Client) -> bool:
        """Deliver buffered jobs oldest first; False if Redis is still unreachable."""
        while True:
            with self._lock:
                if not self._groups:
                    return True
                jobs = self._groups[0]
            try:
                client._write(jobs)
            except TRANSIENT:
                return False
            with self._lock:
                if self._groups and self._groups[0] is jobs:
                    self._groups.popleft()
                    self._count -= len(jobs)
                    if not self._groups:
                        logger.warning("Redis is back: buffered pushes delivered")

    def _run(self, client: Client) -> None:
        while self._count:
            self._wake.wait(FLUSH_INTERVAL)
            self._wake.clear()
            try:
                self.drain(client)
            except Exception:
                logger.exception("delivering buffered pushes failed; will try again")


_buffer = PushBuffer()


def _reset_after_fork() -> None:
    # A child must not deliver the parent's jobs a second time (PRO-007).
    global _buffer
    _buffer = PushBuffer()


os.register_at_fork(after_in_child=_reset_after_fork)


def buffered() -> int:
    """How many jobs are waiting for Redis in this process."""
    return len(_buffer)


def deliver(client: Client, jobs: list[dict]) -> None:
    """Write ``jobs``, buffering them if Redis is unreachable."""
    if len(_buffer) and not _buffer.drain(client):
        _buffer.add(client, jobs, redis_lib.ConnectionError("still unreachable"))
        return
    try:
        client._write(jobs)
    except TRANSIENT as exc:
        if any("bid" in job for job in jobs):
            raise
        _buffer.add(client, jobs, exc)
