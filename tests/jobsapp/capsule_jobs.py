"""Jobs of the capsule tests (tests/server/test_capsules.py): each records, in the test
Redis, when it ran, so the tests judge overlap and order by the worker's own clock."""

from __future__ import annotations

import time

from wurk_django import Job
from wurk_django.errors import Shutdown
from wurk_django.redis.connection import get_redis


class SpanJob(Job):
    """Sleeps ``seconds``; appends ``<marker> <start> <end>`` to ``test:spans``."""

    def perform(self, marker, seconds):
        start = time.time()
        time.sleep(seconds)
        get_redis().rpush("test:spans", f"{marker} {start!r} {time.time()!r}")


class FirstRunSlowJob(Job):
    """Notes its start in ``test:started``; its first run sleeps ``seconds`` (long enough to
    be killed in), a run after a recovery finishes at once into ``test:finished``."""

    def perform(self, marker, seconds):
        redis = get_redis()
        redis.rpush("test:started", marker)
        if redis.incr(f"test:runs:{marker}") == 1:
            time.sleep(seconds)
        redis.rpush("test:finished", marker)


class StubbornJob(Job):
    """Sleeps in short steps until told to stop; then notes when (``interrupted``), keeps
    going ``linger`` seconds more, and notes when it ends (``lingered``)."""

    def perform(self, marker, linger):
        redis = get_redis()
        redis.rpush("test:started", marker)
        try:
            while True:
                time.sleep(0.02)
        except Shutdown:
            redis.rpush("test:interrupted", f"{marker} {time.time()!r}")
            end = time.monotonic() + linger
            while time.monotonic() < end:
                try:
                    time.sleep(0.02)
                except Shutdown:
                    pass
            redis.rpush("test:lingered", f"{marker} {time.time()!r}")
            raise
