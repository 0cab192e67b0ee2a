"""The per-process gauges Ruby wurk sends with every heartbeat: ``sidekiq.busy`` (this
process's running jobs) and ``sidekiq.queue.size`` (the length of each queue it serves),
both tagged ``process:<identity>``, so a dashboard built on them sees Python processes too.
Beside them ``sidekiq.redis.evicted_keys``: Redis's ``evicted_keys`` as the last heartbeat
read it (issue 43 item 3), a server-wide count, so untagged.
"""

from __future__ import annotations

from typing import Any

from ..redis.cluster_layout import layout_of
from ..redis.connection import cluster_for, get_redis
from . import client, emit

#: Seconds between two sends: the heartbeat's interval, as on the Ruby side.
INTERVAL = 10


class ProcessGauges:
    """A launcher component: one tick every :data:`INTERVAL` seconds."""

    def __init__(self, launcher: Any) -> None:
        from ..server.timer import TimerLoop  # the worker side only: a pushing process never builds this

        self.launcher = launcher
        self.loop = TimerLoop("statsd-gauges", self.tick, lambda: INTERVAL, first_wait=INTERVAL)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()

    def tick(self) -> None:
        if client() is None:
            return
        launcher = self.launcher
        process = f"process:{launcher.state.identity}"
        emit("gauge", "busy", launcher.state.busy_count(), [process])
        # A cluster worker's heartbeat reads no eviction count (issue 46): no gauge there.
        evictions = getattr(getattr(launcher, "heartbeat", None), "evictions", None)
        evicted = evictions.evicted if evictions is not None else None
        if evicted is not None:
            emit("gauge", "redis.evicted_keys", evicted)
        names = list(launcher.queue_names)
        if not names:
            return
        clustered = cluster_for(launcher.config)
        redis = clustered if clustered is not None else get_redis(config=launcher.config)
        layout = layout_of(redis)  # {q:<name>}:queue on a Redis Cluster (issue 46 item 3)
        pipe = redis.pipeline(transaction=False)
        for name in names:
            pipe.llen(layout.queue(name))
        for name, size in zip(names, pipe.execute(), strict=True):
            emit("gauge", "queue.size", int(size), [f"queue:{name}", process])


def factory(launcher: Any) -> ProcessGauges | None:
    """Only a process with statsd on sends the gauges."""
    return ProcessGauges(launcher) if client() is not None else None
