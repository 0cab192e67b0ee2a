"""Jobs the Redis Cluster worker tests run (issue 46 stage 3): they record what they did on
the cluster through application code's client (``redis_client()``, a ``RedisCluster``), in
keys of one test tag."""

from __future__ import annotations

import time

from wurk_django import Job, redis_client


def _redis():
    return redis_client()


class ClusterRecordJob(Job):
    """Appends its argument to ``{test}:ran``."""

    def perform(self, value):
        _redis().rpush("{test}:ran", str(value))


class ClusterFlakyJob(Job):
    """Fails its first try, then records like :class:`ClusterRecordJob`; retried after 1 s."""

    retry = 3
    retry_in = staticmethod(lambda count, exc, job: 1)

    def perform(self, value):
        if _redis().incr(f"{{test}}:tries:{value}") < 2:
            raise RuntimeError("the first try fails")
        _redis().rpush("{test}:ran", str(value))


class ClusterDoomedJob(Job):
    """Always fails: one retry after 1 s, then the dead set."""

    retry = 1
    retry_in = staticmethod(lambda count, exc, job: 1)

    def perform(self):
        _redis().incr("{test}:doomed")
        raise RuntimeError("doomed")


class ClusterSlowJob(Job):
    """Notes its start in ``{test}:started``, sleeps, then records its end in ``{test}:ran``."""

    def perform(self, marker, seconds):
        _redis().rpush("{test}:started", marker)
        time.sleep(seconds)
        _redis().rpush("{test}:ran", marker)


class ClusterLateRetryJob(Job):
    """Always fails, its retry an hour away: it stays in its queue's retry set."""

    retry = 3
    retry_in = staticmethod(lambda count, exc, job: 3600)

    def perform(self):
        raise RuntimeError("retried much later")
