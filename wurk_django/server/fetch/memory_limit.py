"""Fetching while Redis is at its ``maxmemory`` limit (issue 25 item 5).

With ``noeviction`` (or nothing it may evict) a full Redis refuses every command
that may grow memory: pushes, and also the fetch's ``LMOVE``/``BLMOVE`` and every
script not flagged ``allow-oom``. If the worker stopped fetching there, nothing
would ever free memory. So when a plain fetch is refused, the fetcher moves jobs
with ``lua/fetch_at_limit.lua``, a script flagged ``allow-oom``: the same atomic
move into the private list, so a job is never only in the worker's memory; the
``LREM`` that acknowledges a job is accepted at the limit and frees its bytes.

The fetcher keeps to that script for :data:`HOLD_SECONDS` after each refusal, then
tries the plain fetch again. The log says once that Redis is full (naming the
limit), and says it is below the limit again only after a plain fetch went through:
never while fetches are being refused. If the server refuses the flagged script too
(a server without script flags), the log says that nothing can be fetched, and why.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import redis as redis_lib

from ...redis.errors import memory_info, memory_limit
from ...redis.scripts import lua

logger = logging.getLogger("wurk_django.worker")

FETCH_AT_LIMIT = lua("fetch_at_limit")
#: Seconds the fetcher keeps to the allow-oom fetch after Redis refused a plain one.
HOLD_SECONDS = 2.0


class MemoryLimit:
    """What one fetcher knows of Redis's memory limit, and its log lines about it."""

    def __init__(self) -> None:
        self._since: float | None = None  # first refusal of the current spell
        self._until = 0.0
        self._stuck = False  # the allow-oom fetch was refused too (logged once per spell)
        self._lock = threading.Lock()

    def holding(self) -> bool:
        """True while fetches should go through the allow-oom script."""
        return time.monotonic() < self._until

    def full(self) -> bool:
        """True from a refused plain fetch until a plain fetch goes through again."""
        return self._since is not None

    def refused(self, client: Any) -> None:
        """A plain fetch was refused at the limit."""
        now = time.monotonic()
        self._until = now + HOLD_SECONDS
        with self._lock:
            first = self._since is None
            if first:
                self._since = now
        if first:
            info = memory_info(client)
            logger.warning(
                "Redis is at its memory limit (%s): it refuses pushes and the plain fetch (LMOVE); "
                "fetching goes on through a script flagged allow-oom, so queued jobs keep running and "
                "each one acknowledged frees memory. Heartbeats, stats and retries may fail until then",
                memory_limit(info) if info else "the limit could not be read")

    def cannot_fetch(self, exc: BaseException) -> None:
        """The allow-oom fetch failed too: nothing can be fetched at the limit."""
        self._until = time.monotonic() + HOLD_SECONDS
        with self._lock:
            first = not self._stuck
            self._stuck = True
            if self._since is None:
                self._since = time.monotonic()
        if first:
            logger.error("Redis is at its memory limit and refuses the allow-oom fetch too (%s: %s): no job "
                         "can be fetched until memory is freed (raise maxmemory, or delete keys)",
                         type(exc).__name__, exc)

    def plain_fetch_worked(self) -> None:
        """A plain fetch went through: the limit is no longer in the way."""
        if self._since is None:  # the common case, without the lock
            return
        with self._lock:
            since, self._since = self._since, None
            self._stuck = False
        if since is not None:
            logger.warning("Redis accepts the plain fetch again (below its memory limit) after %.1fs",
                           time.monotonic() - since)


def is_full(exc: BaseException) -> bool:
    """The error Redis gives a command refused at the memory limit."""
    return isinstance(exc, redis_lib.OutOfMemoryError)
