"""The launcher component that runs the rollups and snapshots in one worker process."""

from __future__ import annotations

import logging
from typing import Any

from .. import keys
from ..redis.connection import cluster_for, get_redis
from ..server.timer import TimerLoop, off_the_beat
from . import leader_check
from .rollup import rollup_queues, rollup_throughput, snapshot
from .settings import HistorySettings

logger = logging.getLogger("wurk_django.worker")


class HistoryComponent:
    """Leader-gated timers; none ticks at start (the first tick is one interval in)."""

    def __init__(self, launcher: Any, options: HistorySettings) -> None:
        self.launcher = launcher
        self.options = options
        self.loops: list[TimerLoop] = []
        rollup = options.rollup_interval
        if rollup:
            self.loops.append(TimerLoop("history-rollup", self.rollup_tick, lambda: rollup,
                                        first_wait=off_the_beat(rollup)))
        every = options.snapshot_interval
        if every:
            self.loops.append(TimerLoop("history-snapshot", self.snapshot_tick, lambda: every,
                                        first_wait=off_the_beat(every)))

    def start(self) -> None:
        for loop in self.loops:
            loop.start()

    def stop(self) -> None:
        for loop in self.loops:
            loop.terminate()
        for loop in self.loops:
            loop.join(3)

    def leads(self, task: str, interval: float) -> bool:
        """Whether this process should run ``task`` now: the leader check if one is set,
        else the ``leader`` component, else a per-interval lock in Redis."""
        check = leader_check()
        if check is not None:
            return bool(check(self.launcher))
        leader = self.launcher.component("leader")
        if leader is not None:
            probe = getattr(leader, "is_leader", None) or getattr(leader, "leader", None)
            return bool(probe() if callable(probe) else probe)
        # No leader election in this deployment: one process per interval takes a lock.
        return bool(self._redis().set(f"{keys.HISTORY_LOCK}:{task}", self.launcher.state.identity, nx=True,
                                    ex=max(int(interval) - 1, 1)))

    def rollup_tick(self) -> None:
        if not self.leads("rollup", self.options.rollup_interval):
            return
        redis = self._redis()
        rollup_throughput(redis)
        rollup_queues(redis)

    def snapshot_tick(self) -> None:
        if not self.leads("snapshot", self.options.snapshot_interval):
            return
        from .. import statsd

        snapshot(self._redis(), cap=self.options.stream_cap, statsd_client=statsd.client())

    def _redis(self) -> Any:
        # The worker's own Redis (a --shard worker's shard) and pool, not the settings' default;
        # on a Redis Cluster its RedisCluster (issue 46 item 3: every key here is used alone,
        # the queues' through the layout).
        config = self.launcher.config
        clustered = cluster_for(config)
        return clustered if clustered is not None else get_redis(config=config)


def factory(launcher: Any) -> HistoryComponent | None:
    options = launcher.config.history
    if options is None or launcher.embedded:
        return None
    return HistoryComponent(launcher, options)
