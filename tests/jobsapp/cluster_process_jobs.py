"""Jobs of the cluster process tests (issue 46 item 3: capsules, queue limits, swarms on a
Redis Cluster): what ran, where and how many at once, in keys of the ``{test}`` tag."""

from __future__ import annotations

import os
import time

from wurk_django import Job, redis_client


class ClusterPeakJob(Job):
    """Counts itself running in ``{test}:running:<queue>`` while it sleeps ``seconds``, noting
    each count it saw at its start in ``{test}:peaks:<queue>`` (the highest is the most that
    ran at once), its pid in ``{test}:pids``, its marker in ``{test}:ran`` at its end."""

    def perform(self, queue, marker, seconds):
        client = redis_client()
        now = client.incr(f"{{test}}:running:{queue}")
        client.rpush(f"{{test}}:peaks:{queue}", now)
        client.rpush("{test}:pids", os.getpid())
        client.rpush("{test}:started", marker)
        try:
            time.sleep(seconds)
        finally:
            client.decr(f"{{test}}:running:{queue}")
        client.rpush("{test}:ran", marker)


class ClusterSpinJob(Job):
    """Notes its start in ``{test}:started``, spins (in Python, so a stop reaches it) for up
    to ``seconds``, notes ``<marker>:stopped`` when a stop interrupts it, and re-raises."""

    retry = 3

    def perform(self, marker, seconds):
        client = redis_client()
        client.rpush("{test}:started", marker)
        end = time.monotonic() + seconds
        try:
            while time.monotonic() < end:
                time.sleep(0.02)
        except BaseException:
            client.rpush("{test}:ran", f"{marker}:stopped")
            raise
        client.rpush("{test}:ran", marker)
