"""The job the Redis Cluster fault tests run (issue 46 item 4): it records each of its runs
*outside* the cluster, on the suite's own Redis (``WURK_TEST_REDIS_URL``), so a failover,
a killed node or a resharding cannot lose or repeat the record itself: every run counts
once, and the test counts jobs lost (never recorded) and run twice (recorded twice)."""

from __future__ import annotations

import os
import threading
import time

import redis

from wurk_django import Job

_lock = threading.Lock()
_client: redis.Redis | None = None


def recorder() -> redis.Redis:
    """The suite's one-server Redis, where runs are recorded (one client per process)."""
    global _client
    with _lock:
        if _client is None:
            _client = redis.Redis.from_url(os.environ.get("WURK_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))
        return _client


class FaultRecordJob(Job):
    """Sleeps ``seconds``, then appends ``"<marker> <time.time()>"`` to ``record`` on the
    suite's Redis: which job ran, and when it finished."""

    retry = 5
    retry_in = staticmethod(lambda count, exc, job: 1)

    def perform(self, record, marker, seconds):
        time.sleep(seconds)
        recorder().rpush(record, f"{marker} {time.time():.6f}")
