"""Read Sidekiq 8 execution metrics back out of Redis (CORE-213, CORE-214).

The writer (Sidekiq 8, or :mod:`wurk_django.metrics.tracker`) keeps, per UTC
minute, a hash ``j|YYMMDD|H:MM`` with fields ``<class>|p`` (executions),
``<class>|f`` (failures) and ``<class>|ms`` (milliseconds spent by runs that
did not fail), plus the same fields summed per ten minutes in
``j|YYMMDD|H:M`` (the minute key without its last digit). Durations also land
in a 26-bucket histogram, ``h|<class>-<d>-<H>:<M>``, a string of saturating
unsigned 16-bit counters read with ``BITFIELD_RO`` (CORE-212).

Everything here is read-only and reads exactly one key per time bucket, so a
page costs at most 480 (minutes) or 432 (72 h of ten-minute buckets) hash
reads in one pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import redis as redis_lib

from .. import keys

__all__ = [
    "BUCKET_BOUNDS_MS",
    "BUCKET_LABELS",
    "MAX_HOURS",
    "MAX_MINUTES",
    "JobResult",
    "MetricsQuery",
    "QueryResult",
    "bucket_index",
    "histogram_key",
    "minute_key",
    "ten_minute_key",
]

#: Upper bounds (ms, exclusive) of the 26 histogram buckets; the last is open (CORE-212).
BUCKET_BOUNDS_MS: tuple[float, ...] = (
    20, 30, 45, 65, 100, 150, 225, 335, 500, 750, 1100, 1700, 2500, 3800, 5750, 8500,
    13000, 20000, 30000, 45000, 65000, 100000, 150000, 225000, 335000, float("inf"),
)
#: A short label per bucket for charts: "20ms", "1.1s", "335s", "∞".
BUCKET_LABELS: tuple[str, ...] = tuple(
    "∞" if b == float("inf") else (f"{b:g}ms" if b < 1000 else f"{b / 1000:g}s") for b in BUCKET_BOUNDS_MS
)
MAX_MINUTES = 480  # the minute keys live 8 h (CORE-065)
MAX_HOURS = 72  # the ten-minute keys live 3 d (CORE-066)
DEFAULT_MINUTES = 60
FIELDS = ("p", "f", "ms")


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


# The key formats live in wurk_django/keys.py; these names are the metrics API's.
minute_key = keys.metrics_minute
ten_minute_key = keys.metrics_ten_minutes
histogram_key = keys.metrics_histogram


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _int(value: Any) -> int:
    if value is None:
        return 0
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


@dataclass
class JobResult:
    """One job class over the queried period.

    ``series[field][bucket]`` holds per-bucket values for ``p``, ``f``, ``ms``
    and the derived ``s`` (seconds); ``totals`` sums them. ``hist`` maps a
    minute bucket to its 26 histogram counters (``for_job`` only).
    """

    name: str
    series: dict[str, dict[str, float]] = field(default_factory=lambda: {k: {} for k in (*FIELDS, "s")})
    totals: dict[str, float] = field(default_factory=lambda: dict.fromkeys((*FIELDS, "s"), 0))
    hist: dict[str, list[int]] = field(default_factory=dict)

    def add(self, bucket: str, kind: str, value: int) -> None:
        self.series[kind][bucket] = self.series[kind].get(bucket, 0) + value
        self.totals[kind] += value
        if kind == "ms":
            self.series["s"][bucket] = self.series["ms"][bucket] / 1000.0
            self.totals["s"] = self.totals["ms"] / 1000.0

    @property
    def processed(self) -> int:
        """Executions, successful or not (``p``)."""
        return int(self.totals["p"])

    @property
    def failed(self) -> int:
        return int(self.totals["f"])

    @property
    def succeeded(self) -> int:
        return max(self.processed - self.failed, 0)

    @property
    def total_ms(self) -> int:
        return int(self.totals["ms"])

    @property
    def total_seconds(self) -> float:
        return self.totals["ms"] / 1000.0

    @property
    def mean_ms(self) -> float:
        """Average duration of a successful run: ``ms ÷ (p − f)``; 0 when none succeeded."""
        runs = self.succeeded
        return self.totals["ms"] / runs if runs else 0.0

    @property
    def mean_seconds(self) -> float:
        return self.mean_ms / 1000.0

    def histogram_totals(self) -> list[int]:
        """The 26 counters summed over every minute read."""
        sums = [0] * len(BUCKET_BOUNDS_MS)
        for counts in self.hist.values():
            for i, n in enumerate(counts):
                sums[i] += n
        return sums


@dataclass
class QueryResult:
    """What a query found: buckets newest first, per-class results, deploy marks."""

    starts_at: datetime
    ends_at: datetime
    granularity: str  # "minute" or "ten_minutes"
    buckets: list[str] = field(default_factory=list)
    job_results: dict[str, JobResult] = field(default_factory=dict)
    marks: list[tuple[str, str]] = field(default_factory=list)

    def top(self, limit: int = 20) -> list[JobResult]:
        """Classes by total time spent, biggest first (ties by name)."""
        ranked = sorted(self.job_results.values(), key=lambda r: (-r.totals["ms"], -r.processed, r.name))
        return ranked[:limit]


class MetricsQuery:
    """Reads the metrics keys as of ``now`` (default: the current UTC minute)."""

    def __init__(self, redis: redis_lib.Redis | None = None, now: datetime | None = None) -> None:
        self._redis = redis
        self.now = _utc(now or datetime.now(UTC)).replace(second=0, microsecond=0)

    @property
    def redis(self) -> redis_lib.Redis:
        # On a Redis Cluster the process's RedisCluster (issue 46 item 3): every metrics
        # key is read alone (one slot each), in non-transactional pipelines.
        from ..redis.layout_client import layout_client

        return layout_client(self._redis)

    def _buckets(self, minutes: int | None, hours: int | None) -> tuple[str, list[tuple[datetime, str]]]:
        """``(granularity, [(bucket start, key), ...])`` newest first, clamped like Sidekiq (CORE-213)."""
        if hours is not None and minutes is None:
            hours = MAX_HOURS if hours > MAX_HOURS or hours < 1 else hours
            start = self.now.replace(minute=self.now.minute - self.now.minute % 10)
            step = timedelta(minutes=10)
            return "ten_minutes", [(start - i * step, ten_minute_key(start - i * step)) for i in range(hours * 6)]
        minutes = DEFAULT_MINUTES if minutes is None or minutes > MAX_MINUTES or minutes < 1 else minutes
        step = timedelta(minutes=1)
        return "minute", [(self.now - i * step, minute_key(self.now - i * step)) for i in range(minutes)]

    def _result(self, granularity: str, buckets: list[tuple[datetime, str]]) -> QueryResult:
        width = timedelta(minutes=10 if granularity == "ten_minutes" else 1)
        result = QueryResult(starts_at=buckets[-1][0], ends_at=buckets[0][0] + width, granularity=granularity,
                             buckets=[_iso(moment) for moment, _ in buckets])
        result.marks = self._marks(result.starts_at, result.ends_at)
        return result

    def top_jobs(self, class_filter: str | None = None, minutes: int | None = None,
                 hours: int | None = None) -> QueryResult:
        """Every job class seen in the period (``HGETALL`` per bucket).

        ``class_filter`` keeps classes whose name contains it, case-insensitively.
        Default period: the last 60 minutes; ``hours`` reads ten-minute buckets.
        """
        granularity, buckets = self._buckets(minutes, hours)
        pipe = self.redis.pipeline(transaction=False)
        for _moment, key in buckets:
            pipe.hgetall(key)
        result = self._result(granularity, buckets)
        needle = class_filter.lower() if class_filter else None
        for (moment, _key), fields in zip(buckets, pipe.execute(), strict=True):
            bucket = _iso(moment)
            for raw_field, raw_value in (fields or {}).items():
                name_kind = raw_field.decode("utf-8", "replace") if isinstance(raw_field, bytes) else str(raw_field)
                # Class names may contain "|" (unlikely, but legal): the kind is after the last one.
                klass, sep, kind = name_kind.rpartition("|")
                if not sep or kind not in FIELDS:
                    continue
                if needle and needle not in klass.lower():
                    continue
                job = result.job_results.get(klass)
                if job is None:
                    job = result.job_results[klass] = JobResult(klass)
                job.add(bucket, kind, _int(raw_value))
        return result

    def for_job(self, klass: str, minutes: int | None = None, hours: int | None = None) -> QueryResult:
        """One class: ``HMGET <key> <class>|ms <class>|p <class>|f`` per bucket, and for
        minute granularity its histogram per minute (CORE-214)."""
        granularity, buckets = self._buckets(minutes, hours)
        redis = self.redis
        pipe = redis.pipeline(transaction=False)
        wanted = [f"{klass}|ms", f"{klass}|p", f"{klass}|f"]
        for _moment, key in buckets:
            pipe.hmget(key, wanted)
        with_hist = granularity == "minute"
        if with_hist:
            for moment, _key in buckets:
                pipe.execute_command("BITFIELD_RO", histogram_key(klass, moment),
                                     *[part for i in range(len(BUCKET_BOUNDS_MS)) for part in ("GET", "u16", f"#{i}")])
        replies = pipe.execute()
        result = self._result(granularity, buckets)
        job = JobResult(klass)
        for (moment, _key), (ms, p, f) in zip(buckets, replies[:len(buckets)], strict=True):
            bucket = _iso(moment)
            for kind, value in (("ms", ms), ("p", p), ("f", f)):
                job.add(bucket, kind, _int(value))
        if with_hist:
            for (moment, _key), counts in zip(buckets, replies[len(buckets):], strict=True):
                counts = [_int(c) for c in counts or []]
                if any(counts):
                    job.hist[_iso(moment)] = counts
        result.job_results[klass] = job
        return result

    def _marks(self, starts_at: datetime, ends_at: datetime) -> list[tuple[str, str]]:
        """Deploy marks (``<YYYYMMDD>-marks``) inside the period, oldest first (CORE-068)."""
        days = []
        day = starts_at.date()
        while day <= ends_at.date():
            days.append(day)
            day += timedelta(days=1)
        pipe = self.redis.pipeline(transaction=False)
        for day in days:
            pipe.hgetall(f"{day:%Y%m%d}-marks")
        low, high = _iso(starts_at), _iso(ends_at)
        marks = []
        for fields in pipe.execute():
            for when, label in (fields or {}).items():
                when = when.decode() if isinstance(when, bytes) else str(when)
                if low <= when < high:
                    label = label.decode("utf-8", "replace") if isinstance(label, bytes) else str(label)
                    marks.append((when, label))
        return sorted(marks)


def bucket_index(duration_ms: float) -> int:
    """The histogram bucket a duration falls in: the first bound strictly greater."""
    for i, bound in enumerate(BUCKET_BOUNDS_MS):
        if duration_ms < bound:
            return i
    return len(BUCKET_BOUNDS_MS) - 1
