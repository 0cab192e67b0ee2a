"""Jobs the Redis Cluster tests of limiters and periodic jobs run (issue 46 item 3): they
record what they did through application code's client (``redis_client()``, a
``RedisCluster``), in keys of the ``{test}`` tag."""

from __future__ import annotations

import time

from wurk_django import Job, limiter, redis_client

#: One limiter of each kind, roomy: every call fits (the kinds' keys and scripts are what is tested).
KINDS = {
    "concurrent": limiter.concurrent("cl-concurrent", 5, wait_timeout=5),
    "bucket": limiter.bucket("cl-bucket", 1000, "minute"),
    "window": limiter.window("cl-window", 1000, 60),
    "leaky": limiter.leaky("cl-leaky", 1000, 60),
    "points": limiter.points("cl-points", 1000, 10),
}
#: One call in an hour, no wait, and a backoff long enough for the test to find the job
#: in its queue's schedule set.
ONCE_AN_HOUR = limiter.window("cl-once", 1, 3600, wait_timeout=0, backoff=lambda _lim, _job, _exc: 600)
#: One holder at a time; a caller waits for the slot (no reschedule).
ONE_AT_A_TIME = limiter.concurrent("cl-one", 1, wait_timeout=30, lock_timeout=30)


class ClusterLimitedJob(Job):
    """Takes capacity of the limiter of ``kind`` and records ``kind`` in ``{test}:ran``."""

    def perform(self, kind):
        chosen = KINDS[kind]
        if kind == "points":
            with chosen.acquire(estimate=3) as held:
                held.points_used(2)
        elif kind == "concurrent":
            with chosen.acquire():
                pass
        else:
            chosen.within_limit(lambda: None)
        redis_client().rpush("{test}:ran", kind)


class ClusterOnceAnHourJob(Job):
    """Runs within ``cl-once`` (one call an hour): the second of its kind is rescheduled."""

    def perform(self, value):
        ONCE_AN_HOUR.within_limit(lambda: redis_client().rpush("{test}:ran", value))


class ClusterOneAtATimeJob(Job):
    """Holds ``cl-one`` for ``seconds``, counting holders at once in ``{test}:holding`` and
    keeping the most seen in ``{test}:most``."""

    def perform(self, value, seconds):
        def hold():
            client = redis_client()
            now = client.incr("{test}:holding")
            client.eval("if tonumber(ARGV[1]) > tonumber(redis.call('GET', KEYS[1]) or '0') then "
                        "redis.call('SET', KEYS[1], ARGV[1]) end", 1, "{test}:most", now)
            time.sleep(seconds)
            client.decr("{test}:holding")
            client.rpush("{test}:ran", value)

        ONE_AT_A_TIME.within_limit(hold)


class ClusterCronJob(Job):
    """Fired by a periodic loop on a cluster: records ``marker:jid`` in ``{test}:cron``."""

    def perform(self, marker):
        redis_client().rpush("{test}:cron", f"{marker}:{self.jid}")
