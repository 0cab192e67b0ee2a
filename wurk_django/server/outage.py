"""Reporting a Redis outage once, and its end with the downtime (CORE-108).

Every processor thread sees the same outage, and every periodic component
(heartbeat, scheduler, reaper, stat flush...) too; logging each failure, with a
traceback, would bury the one fact that matters. Each component keeps one
:class:`OutageLog`: one WARNING line when its first call fails, one line when
a call succeeds again, nothing in between and no traceback.
"""

from __future__ import annotations

import logging
import threading
import time

import redis as redis_lib

from ..redis.errors import is_failover

logger = logging.getLogger("wurk_django.worker")


def is_outage(exc: BaseException) -> bool:
    """True for the errors of an unreachable or restarting Redis, of one refusing writes
    at its ``maxmemory`` limit, and the refusals of a primary going away in a failover
    (``READONLY``, ``NOREPLICAS``...), which redis-py raises as plain error replies:
    states that pass, worth one line each, not a traceback per tick (not for a bad command)."""
    return (isinstance(exc, (redis_lib.ConnectionError, redis_lib.TimeoutError, redis_lib.OutOfMemoryError))
            or is_failover(exc))


# A failure this soon after a recovery belongs to the same outage: pooled connections
# opened before it fail once each when first reused.
SETTLE_SECONDS = 5.0


class OutageLog:
    def __init__(self, what: str, detail: str = "") -> None:
        self.what = what
        self.detail = detail
        self._since: float | None = None
        self._recovered_at = -SETTLE_SECONDS
        self._lock = threading.Lock()

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            first = self._since is None
            if first:
                self._since = time.monotonic()
                if self._since - self._recovered_at < SETTLE_SECONDS:
                    first = False  # the tail of the outage already reported
        if first:
            logger.warning("%s failed%s: %s", self.what, self.detail, exc)

    def succeeded(self) -> None:
        if self._since is None:  # the common case, without the lock
            return
        with self._lock:
            since, self._since = self._since, None
            already = since is not None and since - self._recovered_at < SETTLE_SECONDS
            self._recovered_at = time.monotonic()
        if since is not None and not already:
            logger.warning("%s recovered after %.1fs", self.what, time.monotonic() - since)
