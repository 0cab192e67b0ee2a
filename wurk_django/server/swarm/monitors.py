"""Memory and liveness monitors, and the supervisor's own one-connection Redis probe (ENT-709, RUN-407, RUN-408).

Every 10 s each child's RSS is compared with the memory limit (over it: a
graceful rolling replacement); every 5 s each child's heartbeat must have moved
within ``SWARM_HEARTBEAT_TIMEOUT`` (else TERM, then KILL). The probe is closed
before every fork so no child inherits its socket.
"""

from __future__ import annotations

import logging
import math
import os
import signal
from typing import Any

import redis as redis_lib
from redis.exceptions import RedisClusterException

from ...conf import Config
from ...redis import connection
from .slots import SHUTDOWN_GRACE, child_identity

logger = logging.getLogger("wurk_django.swarm")

MEMORY_CHECK_INTERVAL = 10.0
LIVENESS_CHECK_INTERVAL = 5.0
PROBE_TIMEOUT = 0.5


def memory_limit_kb(config: Config) -> int | None:
    """The RSS cap per child in kB: ``MEMORY_LIMIT_MB``, else env ``WURK_MAXMEM_MB``, else
    ``SIDEKIQ_MAXMEM_MB``; unset, 0 or garbage disables it and never fails boot (RUN-407)."""
    raw: Any = config.memory_limit_mb
    if raw is None:
        raw = os.environ.get("WURK_MAXMEM_MB") or os.environ.get("SIDEKIQ_MAXMEM_MB")
    try:
        megabytes = float(raw) if raw is not None else 0.0
    except (TypeError, ValueError):
        logger.warning("memory limit %r is not a number of megabytes; memory recycling is off", raw)
        return None
    if not math.isfinite(megabytes) or megabytes <= 0:
        return None
    return max(1, int(megabytes * 1024))


def rss_kb(pid: int) -> int | None:
    """Resident set size of ``pid`` in kB from ``/proc/<pid>/statm``; None without /proc (ENT-709)."""
    try:
        with open(f"/proc/{pid}/statm") as f:
            resident = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return resident * os.sysconf("SC_PAGE_SIZE") // 1024


class Monitors:
    """The memory, liveness and probe half of :class:`~wurk_django.server.swarm.supervisor.Swarm`."""

    def _check_memory(self) -> None:
        if not self.memory_limit:
            return
        for index, slot in sorted(self.state.items()):
            if slot.pid is None or (self.restart is not None and self.restart.index == index):
                continue
            kb = rss_kb(slot.pid)
            if kb is None or kb < self.memory_limit:
                continue
            if self.queue_restart(index, "memory recycle"):
                logger.warning("swarm child #%d (%d) uses %d MB, over the memory limit of %d MB; recycling it",
                               index, slot.pid, kb // 1024, self.memory_limit // 1024)

    def _check_liveness(self, now: float) -> None:
        """Replace a child whose heartbeat stopped moving (RUN-408)."""
        if not self.heartbeat_timeout or self.quiet:
            return
        rolling = self.restart.index if self.restart is not None else None
        watched = [c for c in self.children.values()
                   if c.index != rolling and c.term_at is None and self.state[c.index].pid == c.pid]
        if not watched:
            return
        try:
            pipe = self._redis().pipeline(transaction=False)
            for child in watched:
                pipe.hget(self.layout.process(child_identity(child.pid)), "beat")
            beats = pipe.execute()
        except (redis_lib.RedisError, RedisClusterException) as exc:
            if not self._clock.blind:
                logger.warning("swarm heartbeat probe failed (%s); not judging children until it works", exc)
            self._clock.blind = True
            return
        if self._clock.blind:
            self._clock.blind = False
            for child in self.children.values():
                child.beat_moved_at = max(child.beat_moved_at, now)
        for child, beat in zip(watched, beats, strict=True):
            if beat is not None and beat != child.beat:
                child.beat = beat
                child.beat_moved_at = now
            elif now - child.beat_moved_at > self.heartbeat_timeout:
                logger.warning("swarm child #%d (%d) has not beaten for %.0fs; replacing it", child.index,
                               child.pid, now - child.beat_moved_at)
                child.term_at = now
                self._send(child.pid, signal.SIGTERM)

    def _escalate_terms(self, now: float) -> None:
        for child in self.children.values():
            if child.term_at is not None and not child.killed and now - child.term_at >= self.timeout + SHUTDOWN_GRACE:
                logger.warning("swarm child #%d (%d) ignored TERM for %.0fs; killing it", child.index, child.pid,
                               now - child.term_at)
                child.killed = True
                self._send(child.pid, signal.SIGKILL)

    def _has_beaten(self, pid: int) -> bool:
        try:
            return bool(self._redis().sismember(self.layout.processes, child_identity(pid)))
        except (redis_lib.RedisError, RedisClusterException):
            return False  # not seen; the 30 s wait bounds it

    def _redis(self) -> Any:
        """A one-connection client for the supervisor's probes, closed before every fork;
        on a Redis Cluster a cluster client with the same quick timeouts (its keys are
        spread over the primaries)."""
        if self._probe is None:
            if self.cluster:
                from ...redis.cluster import cluster_client

                self._probe = cluster_client(self.config, socket_timeout=PROBE_TIMEOUT,
                                             socket_connect_timeout=PROBE_TIMEOUT)
            else:
                self._probe = connection.probe_redis(self.config, timeout=PROBE_TIMEOUT)
        return self._probe

    def _close_probe(self) -> None:
        probe, self._probe = self._probe, None
        if probe is not None:
            try:
                if self.cluster:
                    probe.close()  # every node's connections (a RedisCluster has no single pool)
                else:
                    probe.connection_pool.disconnect()
            except Exception:  # closing a dead socket may fail; it is gone either way
                pass

