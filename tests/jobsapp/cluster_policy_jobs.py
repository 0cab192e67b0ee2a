"""Jobs the Redis Cluster push-policy tests run (issue 46 item 3): debounced and throttled
classes that record in ``{test}:ran`` on the cluster (application code's ``RedisCluster``)."""

from __future__ import annotations

from wurk_django import Job, redis_client


def _record(value: str) -> None:
    redis_client().rpush("{test}:ran", value)


class ClusterDebounced(Job):
    """Debounced for a second: a burst runs once, with the last push's arguments."""

    debounce_for = 1
    debounce_max_wait = 30

    def perform(self, version):
        _record(f"debounced:{version}")


class ClusterTrackedDebounced(Job):
    """Debounced and tracked (``track``): a replaced push's status record reads ``revoked``."""

    debounce_for = 1
    debounce_max_wait = 30
    track = True

    def perform(self, version):
        _record(f"tracked:{version}")
        return version


class ClusterDebouncedLong(Job):
    """Debounced for a minute: stays pending while the admin's actions act on it."""

    debounce_for = 60

    def perform(self, version):
        _record(f"long:{version}")


class ClusterThrottled(Job):
    """Throttled: one push per 60-second slot."""

    throttle_for = 60

    def perform(self, n):
        _record(f"throttled:{n}")
