"""Historical metrics: cluster throughput, queue sizes and latencies over 24 hours,
7 days and 30 days, and snapshots of the dashboard's totals.

One worker process (the leader, see :func:`set_leader_check`) rolls the
per-minute execution metrics and queue gauges up every minute
(:mod:`.rollup`); the admin's Historical page and these functions read them::

    from wurk_django import history

    history.history("5m", window=7 * 86400)   # [{"at", "processed", "failed", "runtime_ms"}, ...]
    history.queue_history("1h")               # [{"name", "points": [{"at", "size", "latency"}]}]
    history.recent(100)                       # snapshots from the history:metrics stream

Configure with ``WURK["HISTORY"]`` (``False`` turns it off)::

    WURK["HISTORY"] = {"ROLLUP_INTERVAL": 60, "SNAPSHOT_INTERVAL": 30, "STREAM_CAP": 10000}
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .. import keys
from .rollup import BUCKETS, TTLS

__all__ = ["history", "queue_history", "recent", "set_leader_check", "RANGES"]

#: The Historical page's ranges: name -> (bucket, window seconds).
RANGES = {"24h": ("1m", 86_400), "7d": ("5m", 604_800), "30d": ("1h", 2_592_000)}

_leader_check: Callable[[Any], bool] | None = None


def set_leader_check(fn: Callable[[Any], bool] | None) -> None:
    """``fn(launcher) -> bool``: whether this worker process leads and should write rollups.

    ``None`` (the default) uses the launcher's ``leader`` component when there is
    one, and otherwise a per-interval Redis lock so one process per minute rolls up.
    """
    global _leader_check
    _leader_check = fn


def leader_check() -> Callable[[Any], bool] | None:
    return _leader_check


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _client(redis: Any) -> Any:
    """``redis``, else the process's client: on a Redis Cluster its ``RedisCluster`` (issue
    46 item 3; every history key is read alone, one slot each)."""
    from ..redis.layout_client import layout_client

    return layout_client(redis)


def _window(bucket: str, window: float | None, now: float | None) -> tuple[int, list[int]]:
    if bucket not in BUCKETS:
        raise ValueError(f"bucket must be one of {sorted(BUCKETS)}, not {bucket!r}")
    step = BUCKETS[bucket]
    window = TTLS[bucket] if window is None else min(max(float(window), step), TTLS[bucket])
    now = time.time() if now is None else now
    last = int(now // step) * step
    count = int(window // step)
    return step, [last - step * i for i in range(count - 1, -1, -1)]


def history(bucket: str = "1m", window: float | None = None, *, now: float | None = None,
            redis: Any = None) -> list[dict[str, Any]]:
    """Cluster throughput per bucket, oldest first, gaps filled with zeros.

    ``bucket`` is ``"1m"``, ``"5m"`` or ``"1h"``; ``window`` (seconds) is clamped
    to what that bucket keeps (a day, a week, 30 days).
    """
    _step, starts = _window(bucket, window, now)
    client = _client(redis)
    pipe = client.pipeline(transaction=False)
    for start in starts:
        pipe.hmget(keys.throughput_rollup(bucket, start), "p", "f", "ms")
    return [{"at": start, "processed": _int(p), "failed": _int(f), "runtime_ms": _int(ms)}
            for start, (p, f, ms) in zip(starts, pipe.execute(), strict=True)]


def queue_history(bucket: str = "1m", window: float | None = None, *, now: float | None = None,
                  redis: Any = None) -> list[dict[str, Any]]:
    """Size and latency per queue per bucket: ``[{"name", "points": [{"at", "size", "latency"}]}]``."""
    _step, starts = _window(bucket, window, now)
    client = _client(redis)
    pipe = client.pipeline(transaction=False)
    for start in starts:
        pipe.hgetall(keys.queue_rollup(bucket, start))
    series: dict[str, dict[int, tuple[int, float]]] = {}
    for start, fields in zip(starts, pipe.execute(), strict=True):
        for raw_name, raw_value in (fields or {}).items():
            name = raw_name.decode("utf-8", "replace") if isinstance(raw_name, bytes) else str(raw_name)
            queue, _sep, kind = name.rpartition("|")
            size, latency = series.setdefault(queue, {}).get(start, (0, 0.0))
            if kind == "sz":
                size = _int(raw_value)
            elif kind == "lt":
                try:
                    latency = float(raw_value)
                except (TypeError, ValueError):
                    latency = 0.0
            series[queue][start] = (size, latency)
    return [{"name": name, "points": [{"at": s, "size": points.get(s, (0, 0.0))[0],
                                       "latency": points.get(s, (0, 0.0))[1]} for s in starts]}
            for name, points in sorted(series.items())]


def recent(limit: int = 1000, *, redis: Any = None) -> list[dict[str, Any]]:
    """The last ``limit`` snapshots, oldest first: ``{"at": seconds, field: number, ...}``."""
    client = _client(redis)
    points = []
    for entry_id, fields in reversed(client.xrevrange(keys.HISTORY_STREAM, count=limit)):
        ident = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
        point: dict[str, Any] = {"at": int(ident.split("-")[0]) / 1000}
        for raw_name, raw_value in fields.items():
            name = raw_name.decode() if isinstance(raw_name, bytes) else str(raw_name)
            text = raw_value.decode() if isinstance(raw_value, bytes) else str(raw_value)
            try:
                point[name] = int(text)
            except ValueError:
                try:
                    point[name] = float(text)
                except ValueError:
                    point[name] = text  # unknown fields pass through
        points.append(point)
    return points
