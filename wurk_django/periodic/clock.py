"""The poller's clock: wall-clock time, or (tests only) a faster one.

``WURK_TEST_CLOCK="<anchor epoch>,<speed>"`` makes the poller of a worker
process see ``anchor + (now - anchor) * speed`` and wait ``1/speed`` of its
intervals, so a test can watch per-minute loops tick every few seconds.
Every process of the test gets the same value, so they agree on the time.
It exists for the test suite; never set it in production.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

TEST_CLOCK_ENV = "WURK_TEST_CLOCK"


@dataclass(frozen=True)
class Clock:
    anchor: float = 0.0
    speed: float = 1.0

    def now(self) -> float:
        real = time.time()
        return real if self.speed == 1.0 else self.anchor + (real - self.anchor) * self.speed

    def real_seconds(self, seconds: float) -> float:
        """How long to really wait for ``seconds`` of this clock's time."""
        return seconds / self.speed


def from_env(environ=None) -> Clock:
    value = (os.environ if environ is None else environ).get(TEST_CLOCK_ENV, "").strip()
    if not value:
        return Clock()
    try:
        anchor, speed = (float(part) for part in value.split(","))
    except ValueError:
        raise ValueError(f"{TEST_CLOCK_ENV}={value!r} must be '<anchor epoch>,<speed>'") from None
    if speed <= 0:
        raise ValueError(f"{TEST_CLOCK_ENV} speed must be > 0, not {speed}")
    return Clock(anchor, speed)
