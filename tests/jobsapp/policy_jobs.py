"""Jobs for the push-policy tests (issue 47 item 3). They record in the test Redis."""

from __future__ import annotations

from wurk_django import Job
from wurk_django.redis.connection import get_redis


def record(value: str) -> None:
    get_redis().rpush("test:policies", value)


class Reindex(Job):
    """Debounced: a burst runs once, with the last push's arguments."""

    debounce_for = 1
    debounce_max_wait = 30

    def perform(self, version):
        record(f"reindex:{version}")


class SlowBurst(Job):
    """Debounced for long, with a short cap (the tests age a burst by hand)."""

    debounce_for = 30
    debounce_max_wait = 40

    def perform(self, version):
        record(f"slow:{version}")


class PerUser(Job):
    """Debounced per user: ``policy_key`` narrows the burst to the first argument."""

    debounce_for = 30

    @classmethod
    def policy_key(cls, job):
        return job["args"][0]

    def perform(self, user_id, version):
        record(f"user:{user_id}:{version}")


class Ping(Job):
    """Throttled: one push per 60-second slot."""

    throttle_for = 60

    def perform(self, n):
        record(f"ping:{n}")


class Tick(Job):
    """Throttled: one push per 1-second slot."""

    throttle_for = 1

    def perform(self, n):
        record(f"tick:{n}")


class TrackedReindex(Job):
    """Debounced and tracked: a replaced push's status record reads ``revoked``."""

    debounce_for = 1
    debounce_max_wait = 30
    track = True

    def perform(self, version):
        self.progress(50, f"reindexing {version}")
        record(f"tracked:{version}")
        return version
