"""The start of a worker's stop (CORE-157): once only, with the drain's deadline.

A stop may be asked for from several threads at once (a signal, the health endpoint, an
embedding host): the first one drains, the others return at once. The standalone launcher
and the Redis Cluster worker share this rule.
"""

from __future__ import annotations

import threading
import time
from typing import Any


class StopOnce:
    """Lets exactly one caller begin a stop; :attr:`started` tells whether one has."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.started = False

    def begin(self, config: Any, timeout: float | None) -> float | None:
        """The drain's deadline (``time.monotonic()`` seconds) for the first caller, ``timeout``
        seconds from now (default: ``config.timeout``); ``None`` for every later caller."""
        with self._lock:
            if self.started:
                return None
            self.started = True
        return time.monotonic() + (config.timeout if timeout is None else max(timeout, 0.0))
