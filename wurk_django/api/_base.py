"""Small helpers shared by the data API modules."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import redis as redis_lib

from .. import context, payload

# The client of layout-aware reads and actions (issue 46 item 3), named here for the api modules.
from ..redis.layout_client import is_cluster as is_cluster
from ..redis.layout_client import layout_client
from ..redis.layout_client import one_slot as one_slot

#: The client the converted reads and actions use (a ``RedisCluster`` on a cluster).
cluster_aware = layout_client

RedisClient = redis_lib.Redis

# Page size of every paginated read (CORE-242).
PAGE_SIZE = 50


def conn(redis: RedisClient | None) -> RedisClient:
    """The caller's client, else the process-wide one (it answers with bytes, CORE-004)."""
    return context.redis(redis)


def to_int(value: Any, default: int = 0) -> int:
    """Lenient ``to_i``: a field may be missing or written by another tool as ``"3.0"``."""
    if value is None:
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        number = to_float(value, float(default))
        return int(number) if number == number and abs(number) != float("inf") else default


def to_float(value: Any, default: float = 0.0) -> float:
    if value is None:
        return default
    try:
        return float(value)
    except (TypeError, ValueError):
        return default


def utc(seconds: float | None) -> datetime | None:
    if seconds is None:
        return None
    return datetime.fromtimestamp(seconds, tz=UTC)


def timestamp_at(value: Any) -> datetime | None:
    """A payload timestamp in either unit (CORE-040) as an aware UTC datetime."""
    return utc(payload.epoch_seconds(value))


def latency_of(job: dict) -> float:
    """Seconds since ``enqueued_at`` (or ``created_at``); 0.0 when neither is there (CORE-040)."""
    seconds = payload.epoch_seconds(job.get("enqueued_at"))
    if seconds is None:
        seconds = payload.epoch_seconds(job.get("created_at"))
    if seconds is None:
        return 0.0
    return time.time() - seconds


def latency_of_raw(raw: bytes | str | None) -> float:
    """Latency of a raw queue entry; a missing or unparseable entry counts as 0.0."""
    if raw is None:
        return 0.0
    try:
        job = payload.loads(raw)
    except Exception:  # foreign data must not break a dashboard
        return 0.0
    return latency_of(job) if isinstance(job, dict) else 0.0


def epoch(value: datetime | float | int) -> float:
    """Accept a datetime (naive = UTC) or epoch seconds."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.timestamp()
    return float(value)
