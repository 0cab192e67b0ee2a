"""``ProfileSet``: job profiles written by Sidekiq 8 (or us) for the profiles page (CORE-171, CORE-070, CORE-071)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime

from ..redis.cluster_layout import layout_of
from ..text import to_text
from ._base import RedisClient, cluster_aware, to_float, to_int, utc

__all__ = ["ProfileSet", "ProfileRecord"]

_FIELDS = ("started_at", "jid", "type", "token", "size", "elapsed", "filename")


def _seconds(elapsed: object, filename: object) -> float:
    """``elapsed`` in seconds. Sidekiq 8.1, Ruby wurk's current profiler and we write float
    seconds; an earlier Ruby wurk profiler wrote whole milliseconds and no ``filename``. A
    whole number without a ``filename`` is read as those milliseconds."""
    text = to_text(elapsed)
    value = to_float(elapsed)
    if filename is None and text is not None and text.strip().isdigit():
        return value / 1000.0
    return value


class ProfileRecord:
    """One stored profile, addressed by ``<token>-<jid>``."""

    def __init__(self, key: str, values: list, redis: RedisClient | None = None) -> None:
        self.key = key
        started_at, jid, kind, token, size, elapsed, filename = values
        self.started_at: datetime | None = utc(to_float(started_at)) if started_at is not None else None
        self.jid: str | None = to_text(jid)
        self.type: str | None = to_text(kind)
        self.token: str | None = to_text(token)
        self.size: int = to_int(size)
        self.elapsed: float = _seconds(elapsed, filename)
        self._redis = redis

    def __repr__(self) -> str:
        return f"<ProfileRecord {self.key} {self.type}>"

    @property
    def data(self) -> bytes | None:
        """The gzip'd Firefox Profiler JSON, fetched on demand (it can be large)."""
        return cluster_aware(self._redis).hget(self.key, "data")


class ProfileSet:
    """Profiles newest-expiry first; expired members are pruned on each read. On a Redis
    Cluster the index is ``{wurk}:profiles`` (issue 46 item 3), each profile's hash a key of
    its own, read in one pipeline (one round trip per primary)."""

    def __init__(self, redis: RedisClient | None = None) -> None:
        self._redis = redis

    @property
    def redis(self) -> RedisClient:
        return cluster_aware(self._redis)

    @property
    def _index(self) -> str:
        return layout_of(self.redis).profiles

    def _prune(self) -> None:
        # A member's score is its expiry; the hash has already expired by then.
        self.redis.zremrangebyscore(self._index, "-inf", time.time())

    @property
    def size(self) -> int:
        self._prune()
        return int(self.redis.zcard(self._index))

    def __len__(self) -> int:
        return self.size

    def __iter__(self) -> Iterator[ProfileRecord]:
        self._prune()
        redis = self.redis
        members = [to_text(k) for k in redis.zrange(self._index, "+inf", 0, byscore=True, desc=True)]
        if not members:
            return
        pipe = redis.pipeline(transaction=False)
        for key in members:
            pipe.hmget(key, *_FIELDS)
        for key, values in zip(members, pipe.execute(), strict=True):
            if any(v is not None for v in values):
                yield ProfileRecord(key, values, redis=self._redis)

    def find(self, key: str) -> ProfileRecord | None:
        """The profile stored under ``<token>-<jid>``, or ``None``."""
        values = self.redis.hmget(key, *_FIELDS)
        if all(v is None for v in values):
            return None
        return ProfileRecord(key, values, redis=self._redis)
