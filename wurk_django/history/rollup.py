"""The rollups behind the Historical page, run every minute by one process (the leader).

* Throughput: the per-minute execution metrics ``j|YYMMDD|H:MM`` (fields
  ``<class>|p``, ``|f``, ``|ms``) summed over every class into
  ``jr|1m|<minute>``, then re-summed into 5-minute and hourly buckets. The
  per-minute source keys live 8 hours; the rollups keep a day of minutes, a
  week of 5-minute buckets and 30 days of hours.
* Queue gauges: the size of every queue and the age of its oldest job, written
  to the current 1m/5m/1h ``qm|`` bucket (the last sample in a bucket wins).
* Snapshots: the dashboard's totals appended to the ``history:metrics`` stream.

Every write overwrites with recomputed sums, so a tick that runs twice (two
processes both believing they lead for a few seconds) or a re-run after a
crash converges to the same numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .. import keys, payload
from ..metrics.query import minute_key
from ..redis.cluster_layout import known_queues, layout_of

BUCKETS = {"1m": 60, "5m": 300, "1h": 3600}
TTLS = {"1m": 86_400, "5m": 604_800, "1h": 2_592_000}
LOOKBACK_MINUTES = 15
STREAM_CAP = 10_000
SNAPSHOT_FIELDS = ("processed", "failures", "enqueued", "retries", "dead", "scheduled", "busy")


def _sum_minute(fields: dict) -> tuple[int, int, int]:
    p = f = ms = 0
    for raw_name, raw_value in (fields or {}).items():
        name = raw_name.decode("utf-8", "replace") if isinstance(raw_name, bytes) else str(raw_name)
        _klass, _sep, kind = name.rpartition("|")
        try:
            value = int(raw_value)
        except (TypeError, ValueError):
            continue
        if kind == "p":
            p += value
        elif kind == "f":
            f += value
        elif kind == "ms":
            ms += value
    return p, f, ms


def rollup_throughput(redis: Any, now: float | None = None) -> int:
    """Roll the last 15 complete minutes up; returns how many minutes had work."""
    now = time.time() if now is None else now
    current = int(now // 60) * 60
    minutes = [current - 60 * i for i in range(1, LOOKBACK_MINUTES + 1)]
    pipe = redis.pipeline(transaction=False)
    for start in minutes:
        pipe.hgetall(minute_key(datetime.fromtimestamp(start, tz=UTC)))
    sums = [_sum_minute(fields) for fields in pipe.execute()]
    pipe = redis.pipeline(transaction=False)
    busy = 0
    for start, (p, f, ms) in zip(minutes, sums, strict=True):
        if p or f or ms:
            busy += 1
            key = keys.throughput_rollup("1m", start)
            pipe.hset(key, mapping={"p": p, "f": f, "ms": ms})
            pipe.expire(key, TTLS["1m"])
    pipe.execute()
    # Every 5-minute and hourly window these minutes touch, re-summed from its minutes.
    for bucket in ("5m", "1h"):
        step = BUCKETS[bucket]
        windows = sorted({start // step * step for start in minutes})
        pipe = redis.pipeline(transaction=False)
        for window in windows:
            for child in range(window, window + step, 60):
                pipe.hmget(keys.throughput_rollup("1m", child), "p", "f", "ms")
        replies = pipe.execute()
        per_window = step // 60
        pipe = redis.pipeline(transaction=False)
        for i, window in enumerate(windows):
            total = [0, 0, 0]
            for row in replies[i * per_window:(i + 1) * per_window]:
                for j, value in enumerate(row):
                    total[j] += int(value or 0)
            if any(total):
                key = keys.throughput_rollup(bucket, window)
                pipe.hset(key, mapping={"p": total[0], "f": total[1], "ms": total[2]})
                pipe.expire(key, TTLS[bucket])
        pipe.execute()
    return busy


def _latency(raw: Any, now: float) -> float:
    if not raw:
        return 0.0
    try:
        job = payload.loads(raw)
        enqueued = payload.epoch_seconds(job.get("enqueued_at")) if isinstance(job, dict) else None
    except Exception:
        return 0.0  # a bad payload has no meaningful age
    if enqueued is None:
        return 0.0
    return round(max(now - enqueued, 0.0), 2)


def rollup_queues(redis: Any, now: float | None = None) -> int:
    """Sample every queue's size and latency into the current buckets; returns the queue count."""
    now = time.time() if now is None else now
    layout = layout_of(redis)  # on a Redis Cluster: {wurk}:queues and {q:<name>}:queue
    names = known_queues(redis)
    if not names:
        return 0
    pipe = redis.pipeline(transaction=False)
    for name in names:
        pipe.llen(layout.queue(name))
        pipe.lrange(layout.queue(name), -1, -1)
    replies = pipe.execute()
    mapping: dict[str, Any] = {}
    for i, name in enumerate(names):
        size, tail = replies[2 * i], replies[2 * i + 1]
        mapping[f"{name}|sz"] = int(size)
        mapping[f"{name}|lt"] = _latency(tail[0] if tail else None, now)
    pipe = redis.pipeline(transaction=False)
    for bucket, step in BUCKETS.items():
        key = keys.queue_rollup(bucket, int(now // step) * step)
        pipe.hset(key, mapping=mapping)
        pipe.expire(key, TTLS[bucket])
    pipe.execute()
    return len(names)


def default_collector() -> dict[str, int]:
    """The dashboard's totals, as the snapshot stream stores them."""
    from ..api import Stats

    stats = Stats()  # on a Redis Cluster, summed over every queue's sets
    return {"processed": stats.processed, "failures": stats.failed, "enqueued": stats.enqueued,
            "retries": stats.retry_size, "dead": stats.dead_size, "scheduled": stats.scheduled_size,
            "busy": stats.workers_size}


def snapshot(redis: Any, collector: Callable[[], dict[str, Any]] | None = None, cap: int = STREAM_CAP,
             statsd_client: Any = None) -> dict[str, Any]:
    """Append one snapshot to ``history:metrics`` (trimmed to about ``cap`` entries) and, when a
    statsd client is configured, send the same values as ``sidekiq.<name>`` gauges."""
    values = (collector or default_collector)()
    redis.xadd(keys.HISTORY_STREAM, {k: v for k, v in values.items()}, maxlen=cap, approximate=True)
    if statsd_client is not None:
        from ..statsd import emit

        for name, value in values.items():
            if isinstance(value, (int, float)):
                emit("gauge", name, value, to=statsd_client)
        queue_gauges(redis, statsd_client)
    return values


def queue_gauges(redis: Any, statsd_client: Any, now: float | None = None) -> None:
    """Enterprise's per-queue gauges: ``sidekiq.queue.size`` for every queue and
    ``sidekiq.queue.latency`` for ``default``, tagged ``queue:<name>``."""
    from ..statsd import emit

    now = time.time() if now is None else now
    layout = layout_of(redis)
    names = known_queues(redis)
    if not names:
        return
    pipe = redis.pipeline(transaction=False)
    for name in names:
        pipe.llen(layout.queue(name))
    pipe.lrange(layout.queue("default"), -1, -1)
    *sizes, tail = pipe.execute()
    for name, size in zip(names, sizes, strict=True):
        emit("gauge", "queue.size", int(size), [f"queue:{name}"], to=statsd_client)
    if "default" in names:
        emit("gauge", "queue.latency", _latency(tail[0] if tail else None, now), ["queue:default"], to=statsd_client)
