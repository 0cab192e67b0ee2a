"""Jobs for the time-limit and revoke tests (issue 27 items 3, 4). They record in the test Redis."""

from __future__ import annotations

import time

from wurk_django import Job, SoftTimeLimitExceeded
from wurk_django.redis.connection import get_redis


def record(value: str) -> None:
    get_redis().rpush("test:limits", value)


def _spin_until(deadline: float) -> int:
    n = 0
    while time.monotonic() < deadline:
        n += 1
    return n


class SoftCaught(Job):
    """Catches its soft limit, cleans up, and returns."""

    soft_time_limit = 0.5
    retry = 0

    def perform(self, tag):
        record(f"{tag}:start")
        try:
            _spin_until(time.monotonic() + 120)
            record(f"{tag}:not-interrupted")
        except SoftTimeLimitExceeded:
            record(f"{tag}:cleaned")


class SoftUncaught(Job):
    """Lets its soft limit escape: a failure like any other, retried."""

    soft_time_limit = 0.5
    retry = 3

    def perform(self, tag):
        record(f"{tag}:start")
        _spin_until(time.monotonic() + 120)
        record(f"{tag}:not-interrupted")


class Spin(Job):
    """``while True: pass`` with a hard limit only."""

    time_limit = 1
    retry = 2

    def perform(self, tag):
        record(f"{tag}:start")
        while True:
            pass


class Sleeper(Job):
    """One long C call (time.sleep): only the hard limit can stop it."""

    time_limit = 1
    retry = 0

    def perform(self, tag, seconds=30):
        record(f"{tag}:start")
        time.sleep(seconds)
        record(f"{tag}:woke")


class Stubborn(Job):
    """Notes the soft stop of a revoke, then ignores it: the hard stop ends it."""

    retry = 3

    def perform(self, tag):
        record(f"{tag}:start")
        try:
            _spin_until(time.monotonic() + 300)
        except SoftTimeLimitExceeded:
            record(f"{tag}:soft")
        _spin_until(time.monotonic() + 300)
        record(f"{tag}:survived")


class Pair(Job):
    """Waits (up to 60 s) until ``size`` jobs of its ``group`` run at the same time: proof
    that the worker runs that many at once."""

    def perform(self, group, size):
        redis = get_redis()
        key = f"test:pair:{group}"
        redis.rpush(key, self.jid)
        deadline = time.monotonic() + 60
        while redis.llen(key) < size and time.monotonic() < deadline:
            time.sleep(0.05)
        record(f"{group}:{'together' if redis.llen(key) >= size else 'alone'}")


class AsyncSoft(Job):
    """``async def``: the soft limit cancels its task; uncaught, a failure that retries."""

    soft_time_limit = 0.5
    retry = 3

    async def perform(self, tag):
        import asyncio

        record(f"{tag}:start")
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            record(f"{tag}:cancelled")
            raise
        record(f"{tag}:not-interrupted")


class AsyncHard(Job):
    """``async def`` with a hard limit only: its task is cancelled and its thread replaced."""

    time_limit = 1
    retry = 3

    async def perform(self, tag):
        import asyncio

        record(f"{tag}:start")
        await asyncio.sleep(60)
        record(f"{tag}:not-interrupted")


class LateWaker(Job):
    """Blocked in one C call past its hard limit, then, once the sleep returns, swallows the
    HardStop its thread was asked to raise and returns normally: a success that must count
    for nothing, as its run was abandoned and settled already."""

    time_limit = 1
    retry = 0

    def perform(self, tag, seconds=4):
        record(f"{tag}:start")
        try:
            time.sleep(seconds)
        except BaseException:
            pass
        record(f"{tag}:woke")


class Stuck(Job):
    """Blocked in ``time.sleep`` far past its hard limit: its thread stays abandoned."""

    time_limit = 1
    retry = 0

    def perform(self, seconds=300):
        time.sleep(seconds)
        record("stuck:woke")


class Tick(Job):
    """A job of one Redis call: counts itself in ``test:ticks``."""

    def perform(self, n):
        get_redis().rpush("test:ticks", n)


class HoldsLease(Job):
    """Takes the one slot of a concurrent limiter, then sleeps in C past its hard limit."""

    time_limit = 1
    retry = 0

    def perform(self, name, seconds):
        from wurk_django import limiter

        gate = limiter.Concurrent(name, 1, wait_timeout=0, lock_timeout=600, register=False)
        gate.within_limit(time.sleep, seconds)


class WantsLease(Job):
    """Asks for the same limiter's slot, waiting up to ``wait`` seconds; records whether it got it."""

    retry = 0

    def perform(self, name, wait):
        from wurk_django import limiter

        gate = limiter.Concurrent(name, 1, wait_timeout=wait, lock_timeout=600, policy="ignore", register=False)
        got = gate.within_limit(lambda: True)
        record(f"lease:{'taken' if got else 'refused'}")
