"""A clock the limiter scripts follow instead of reading Redis TIME themselves, and
the admin login fixtures."""

from __future__ import annotations

import pytest

# The admin page tests log in the way tests/admin does.
from tests.admin.conftest import admin_client, manager, manager_client  # noqa: F401


class Clock:
    """Epoch seconds that start at the Redis server's own TIME and move only when told."""

    def __init__(self, start: float) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def at(self, when: float) -> None:
        self.now = when


@pytest.fixture
def clock(redis_db):
    s, us = redis_db.time()
    return Clock(int(s) + int(us) / 1e6)


def driven(limiter, clock: Clock):
    """``limiter`` with its scripts following ``clock``."""
    limiter.clock = clock
    return limiter
