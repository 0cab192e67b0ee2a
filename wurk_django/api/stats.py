"""Counters for dashboards: ``Stats`` (now) and ``StatsHistory`` (per UTC day) (CORE-161, CORE-162)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from .. import keys
from ..redis.cluster_layout import known_queues, layout_of
from ..text import to_text
from ._base import RedisClient, cluster_aware, latency_of_raw, to_int

__all__ = ["Stats", "StatsHistory", "QueueSummary"]

MAX_HISTORY_DAYS = 1825  # five years, the lifetime of the per-day keys (CORE-056)
_RESETTABLE = ("processed", "failed", "expired")
_RESET_BY_DEFAULT = ("processed", "failed")  # as Sidekiq's Stats#reset


@dataclass(frozen=True)
class QueueSummary:
    """One row of the queues page."""

    name: str
    size: int
    latency: float
    paused: bool


class Stats:
    """A snapshot of the global counters, read in one round trip when built.

    ``workers_size`` and ``enqueued`` need one read per process / queue and are
    computed on first use.

    On a Redis Cluster (issue 46) the counters are ``{stats}:stat:*`` and the
    scheduled, retry and dead sizes are summed over every known queue's own sets:
    one more round trip (the queue set), then three ``ZCARD`` per queue.
    """

    def __init__(self, redis: RedisClient | None = None) -> None:
        self._redis = redis
        if layout_of(self.redis).cluster:
            self._load_cluster()
            return
        pipe = self.redis.pipeline(transaction=False)
        pipe.get(keys.STAT_PROCESSED)
        pipe.get(keys.STAT_FAILED)
        pipe.zcard(keys.SCHEDULE)
        pipe.zcard(keys.RETRY)
        pipe.zcard(keys.DEAD)
        pipe.scard(keys.PROCESSES)
        pipe.lindex(keys.queue("default"), -1)
        pipe.get(keys.STAT_EXPIRED)
        processed, failed, scheduled, retries, dead, processes, oldest_default, expired = pipe.execute()
        self.processed: int = to_int(processed)
        self.failed: int = to_int(failed)
        #: Jobs skipped because their ``expires_in`` passed (also counted in ``processed``),
        #: as Sidekiq Pro and Ruby wurk count them.
        self.expired: int = to_int(expired)
        self.scheduled_size: int = int(scheduled)
        self.retry_size: int = int(retries)
        self.dead_size: int = int(dead)
        self.processes_size: int = int(processes)
        self.default_queue_latency: float = latency_of_raw(oldest_default)
        self._workers_size: int | None = None
        self._enqueued: int | None = None

    @property
    def redis(self) -> RedisClient:
        return cluster_aware(self._redis)

    def _load_cluster(self) -> None:
        redis = self.redis
        layout = layout_of(redis)
        names = known_queues(redis)
        pipe = redis.pipeline(transaction=False)
        for kind in ("processed", "failed", "expired"):
            pipe.get(layout.stat(kind))
        pipe.scard(layout.processes)
        pipe.lindex(layout.queue("default"), -1)
        for name in names:
            pipe.zcard(layout.schedule(name))
            pipe.zcard(layout.retry(name))
            pipe.zcard(layout.dead(name))
        processed, failed, expired, processes, oldest_default, *sizes = pipe.execute()
        self.processed = to_int(processed)
        self.failed = to_int(failed)
        self.expired = to_int(expired)
        self.scheduled_size = sum(int(n) for n in sizes[0::3])
        self.retry_size = sum(int(n) for n in sizes[1::3])
        self.dead_size = sum(int(n) for n in sizes[2::3])
        self.processes_size = int(processes)
        self.default_queue_latency = latency_of_raw(oldest_default)
        self._workers_size = None
        self._enqueued = None

    def _load_slow(self) -> None:
        redis = self.redis
        layout = layout_of(redis)
        if layout.cluster:
            identities = list(redis.sscan_iter(layout.processes))
            queues = list(redis.sscan_iter(layout.queues))
            pipe = redis.pipeline(transaction=False)
            for identity in identities:
                pipe.hget(layout.process(to_text(identity)), "busy")
            for queue in queues:
                pipe.llen(layout.queue(to_text(queue)))
            replies = pipe.execute() if identities or queues else []
            self._workers_size = sum(to_int(v) for v in replies[:len(identities)])
            self._enqueued = sum(int(v) for v in replies[len(identities):])
            return
        identities = list(redis.sscan_iter(keys.PROCESSES))
        queues = list(redis.sscan_iter(keys.QUEUES))
        pipe = redis.pipeline(transaction=False)
        for identity in identities:
            pipe.hget(identity, "busy")
        for queue in queues:
            pipe.llen(keys.QUEUE_PREFIX.encode() + queue)
        replies = pipe.execute() if identities or queues else []
        self._workers_size = sum(to_int(v) for v in replies[:len(identities)])
        self._enqueued = sum(int(v) for v in replies[len(identities):])

    @property
    def workers_size(self) -> int:
        """Jobs running now: Σ ``busy`` over the live processes."""
        if self._workers_size is None:
            self._load_slow()
        return self._workers_size  # type: ignore[return-value]

    @property
    def enqueued(self) -> int:
        """Jobs waiting in all queues: Σ ``LLEN`` over the ``queues`` set."""
        if self._enqueued is None:
            self._load_slow()
        return self._enqueued  # type: ignore[return-value]

    def queues(self) -> dict[str, int]:
        """``{queue name: size}``, biggest first."""
        return {s.name: s.size for s in self.queue_summaries()}

    def queue_summaries(self) -> list[QueueSummary]:
        """Name, size, latency and paused flag of every queue, biggest first (ties by name)."""
        redis = self.redis
        layout = layout_of(redis)
        names = sorted(to_text(q) for q in redis.sscan_iter(layout.queues))
        if not names:
            return []
        pipe = redis.pipeline(transaction=False)
        for name in names:
            pipe.llen(layout.queue(name))
            pipe.lindex(layout.queue(name), -1)
            if layout.cluster:  # a flag per queue there, in the queue's slot
                pipe.exists(layout.paused(name))
            else:
                pipe.sismember(keys.PAUSED, name)
        replies = pipe.execute()
        summaries = [
            QueueSummary(name=name, size=int(replies[3 * i]), latency=latency_of_raw(replies[3 * i + 1]),
                         paused=bool(replies[3 * i + 2]))
            for i, name in enumerate(names)
        ]
        summaries.sort(key=lambda s: -s.size)
        return summaries

    def unserved_queues(self, summaries: list[QueueSummary] | None = None) -> list[QueueSummary]:
        """Queues holding jobs that no live process fetches from: they will wait forever
        unless a worker is started (or restarted) with that queue."""
        from .process import ProcessSet

        rows = self.queue_summaries() if summaries is None else summaries
        waiting = [row for row in rows if row.size > 0]
        if not waiting:
            return []
        served: set[str] = set()
        for process in ProcessSet(clean=False, redis=self._redis):
            served.update(process.queues)
        return [row for row in waiting if row.name not in served]

    def reset(self, *names: str) -> None:
        """Set the lifetime counters to 0 (``processed`` and ``failed`` by default;
        ``"expired"`` when named; other names are ignored). Per-day history is left alone."""
        chosen = [n for n in _RESETTABLE if n in names] if names else list(_RESET_BY_DEFAULT)
        if chosen:
            redis = self.redis
            layout = layout_of(redis)  # on a cluster all under {stats}: one slot, one MSET
            redis.mset({layout.stat(n): 0 for n in chosen})


class StatsHistory:
    """Processed/failed counts per UTC day, going back ``days`` days from ``start``."""

    def __init__(self, days: int, start: date | datetime | None = None, redis: RedisClient | None = None) -> None:
        if isinstance(days, bool) or not isinstance(days, int) or not 1 <= days <= MAX_HISTORY_DAYS:
            raise ValueError(f"days must be an integer from 1 to {MAX_HISTORY_DAYS}, not {days!r}")
        if start is None:
            start = datetime.now(UTC).date()
        elif isinstance(start, datetime):
            start = (start.astimezone(UTC) if start.tzinfo else start).date()
        self.days = days
        self.start = start
        self._redis = redis

    @property
    def redis(self) -> RedisClient:
        return cluster_aware(self._redis)

    def dates(self) -> list[str]:
        """``YYYY-MM-DD`` from ``start`` backwards."""
        return [(self.start - timedelta(days=i)).isoformat() for i in range(self.days)]

    def processed(self) -> dict[str, int]:
        return self._series("processed")

    def failed(self) -> dict[str, int]:
        return self._series("failed")

    def expired(self) -> dict[str, int]:
        return self._series("expired")

    def _series(self, kind: str) -> dict[str, int]:
        dates = self.dates()
        redis = self.redis
        layout = layout_of(redis)  # on a cluster all under {stats}: one slot, one MGET
        values = redis.mget([layout.stat_on(kind, d) for d in dates])
        # A day nobody worked has no key at all: that is a 0, not a gap.
        return {d: to_int(v) for d, v in zip(dates, values, strict=True)}
