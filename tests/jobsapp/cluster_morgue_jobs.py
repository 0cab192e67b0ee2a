"""A job the Redis Cluster morgue test runs (issue 46 item 3)."""

from __future__ import annotations

from wurk_django import Job, redis_client


class ClusterStraightToTheMorgue(Job):
    """Fails with ``retry = 0``: no retry, straight to its queue's dead set (``retry = False``
    would discard it)."""

    retry = 0

    def perform(self, value):
        redis_client().rpush("{test}:ran", str(value))
        raise RuntimeError("to the morgue")
