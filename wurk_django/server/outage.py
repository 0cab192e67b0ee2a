"""Reporting a Redis outage once, and its end with the downtime (CORE-108).

Every processor thread sees the same outage; logging each failure would print
concurrency lines a second for as long as Redis is away.
"""

from __future__ import annotations

import logging
import threading
import time

logger = logging.getLogger("wurk_django.worker")


class OutageLog:
    def __init__(self, what: str, detail: str = "") -> None:
        self.what = what
        self.detail = detail
        self._since: float | None = None
        self._lock = threading.Lock()

    def failed(self, exc: BaseException) -> None:
        with self._lock:
            first = self._since is None
            if first:
                self._since = time.monotonic()
        if first:
            logger.error("%s failed%s: %s", self.what, self.detail, exc)

    def succeeded(self) -> None:
        if self._since is None:  # the common case, without the lock
            return
        with self._lock:
            since, self._since = self._since, None
        if since is not None:
            logger.warning("%s recovered after %.1fs", self.what, time.monotonic() - since)
