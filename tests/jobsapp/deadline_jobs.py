"""Jobs for the deadline tests (issue 47 item 5). They record in the test Redis."""

from __future__ import annotations

import time

from wurk_django import Job
from wurk_django.redis.connection import get_redis


def record(value: str) -> None:
    get_redis().rpush("test:deadline", value)


class Note(Job):
    """Records that it ran."""

    retry = 5

    def perform(self, tag):
        record(f"{tag}:ran")


class Nap(Job):
    """One long C call (time.sleep): only an abandonment stops it."""

    retry = 5

    def perform(self, tag, seconds=60):
        record(f"{tag}:start")
        time.sleep(seconds)
        record(f"{tag}:woke")


class Loop(Job):
    """A Python loop: the hard stop's exception unwinds it."""

    retry = 5

    def perform(self, tag):
        record(f"{tag}:start")
        try:
            end = time.monotonic() + 120
            while time.monotonic() < end:
                pass
            record(f"{tag}:not-stopped")
        except BaseException as exc:
            record(f"{tag}:unwound:{type(exc).__name__}")
            raise


class Fails(Job):
    """Fails at once; its first retry (15 s or more away) is after its deadline."""

    retry = 5

    def perform(self, tag):
        record(f"{tag}:failed")
        raise RuntimeError(f"{tag} broke")


class UniqueNote(Job):
    """A unique job: its lock must go with it when its deadline drops it."""

    unique_for = 600
    retry = 5

    def perform(self, tag):
        record(f"{tag}:ran")
