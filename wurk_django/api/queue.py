"""``Queue``: read and edit one ``queue:<name>`` list (CORE-163)."""

from __future__ import annotations

from collections.abc import Iterator

from .. import keys
from .. import pause as pausing
from ._base import PAGE_SIZE, RedisClient, conn, latency_of_raw, text
from .record import JobRecord

__all__ = ["Queue"]


class Queue:
    """One queue. Producers ``LPUSH`` (left = newest), workers pop from the right
    (oldest), so iteration goes newest first (CORE-051)."""

    def __init__(self, name: str = "default", redis: RedisClient | None = None) -> None:
        self.name = name
        self.rname = keys.queue(name)
        self._redis = redis

    @property
    def redis(self) -> RedisClient:
        return conn(self._redis)

    @classmethod
    def all(cls, redis: RedisClient | None = None) -> list[Queue]:
        """Every queue named in the ``queues`` set, sorted by name."""
        names = sorted(text(n) for n in conn(redis).smembers(keys.QUEUES))
        return [cls(name, redis=redis) for name in names]

    def __repr__(self) -> str:
        return f"<Queue {self.name}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Queue) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    @property
    def size(self) -> int:
        return int(self.redis.llen(self.rname))

    def __len__(self) -> int:
        return self.size

    @property
    def paused(self) -> bool:
        """Whether the queue is in the ``paused`` set, read live from Redis (PRO-300)."""
        return bool(self.redis.sismember(keys.PAUSED, self.name))

    def pause(self) -> None:
        """Stop every worker from fetching this queue (within 2 s); running jobs finish (PRO-300)."""
        pausing.pause(self.name, self.redis)

    def unpause(self) -> None:
        pausing.unpause(self.name, self.redis)

    @property
    def latency(self) -> float:
        """Age in seconds of the oldest job (the one fetched next); 0.0 if empty."""
        return latency_of_raw(self.redis.lindex(self.rname, -1))

    def __iter__(self) -> Iterator[JobRecord]:
        """Every job, newest first, ``PAGE_SIZE`` per round trip.

        Between pages the start index moves back by how much the list shrank
        (forward if it grew), so deleting jobs while iterating does not skip
        any, and new pushes at the head do not repeat any. Removals at the far
        end may make a few jobs show twice: better than missing one.
        """
        redis = self.redis
        initial = self.size
        page = 0
        shift = 0
        while True:
            start = max(page * PAGE_SIZE - shift, 0)
            entries = redis.lrange(self.rname, start, start + PAGE_SIZE - 1)
            if not entries:
                return
            page += 1
            for entry in entries:
                yield JobRecord(entry, self.name, redis=self._redis)
            shift = initial - self.size

    def find_job(self, jid: str) -> JobRecord | None:
        """The job with this ``jid`` (a linear scan: fine for UI use, slow on huge queues)."""
        needle = jid.encode() if isinstance(jid, str) else jid
        for record in self:
            # Cheap substring test first so most entries are never parsed.
            if needle in record.value and record.jid == jid:
                return record
        return None

    def delete_job(self, value: bytes | str) -> bool:
        """Remove one job given its exact stored bytes (``LREM … 1``, CORE-004)."""
        return bool(self.redis.lrem(self.rname, 1, value))

    def clear(self) -> bool:
        """Drop every job and forget the queue: ``MULTI UNLINK queue:<n>; SREM queues <n>``."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.unlink(self.rname)
        pipe.srem(keys.QUEUES, self.name)
        pipe.execute()
        return True
