"""``Queue``: read and edit one ``queue:<name>`` list (CORE-163)."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import overload

from .. import keys
from .. import pause as pausing
from ..redis.cluster_layout import known_queues, layout_of
from ..redis.scripts import lua
from ._base import PAGE_SIZE, RedisClient, cluster_aware, latency_of_raw, one_slot
from .record import JobRecord

__all__ = ["Queue"]


def _needles(field: str, value: str) -> list[str]:
    """The literal JSON text ``"field":"value"`` as Sidekiq and orjson write it, and the
    spaced form Python's ``json.dumps`` writes."""
    encoded = json.dumps(value, ensure_ascii=False)
    return [f'"{field}":{encoded}', f'"{field}": {encoded}']


class Queue:
    """One queue. Producers ``LPUSH`` (left = newest), workers pop from the right
    (oldest), so iteration goes newest first (CORE-051).

    On a Redis Cluster (issue 46) the list is ``{q:<name>}:queue`` and the queue set
    ``{wurk}:queues``: :attr:`rname` names the key of the Redis the queue reads."""

    def __init__(self, name: str = "default", redis: RedisClient | None = None) -> None:
        self.name = name
        self._redis = redis

    @property
    def redis(self) -> RedisClient:
        return cluster_aware(self._redis)

    @property
    def rname(self) -> str:
        """The key of the list: ``queue:<name>``, ``{q:<name>}:queue`` on a cluster."""
        return layout_of(self.redis).queue(self.name)

    @classmethod
    def all(cls, redis: RedisClient | None = None) -> list[Queue]:
        """Every queue named in the ``queues`` set, sorted by name."""
        return [cls(name, redis=redis) for name in known_queues(cluster_aware(redis))]

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
        """Whether the queue is in the ``paused`` set, read live from Redis (PRO-300); on a
        cluster, whether its flag ``{q:<name>}:paused`` is set."""
        redis = self.redis
        layout = layout_of(redis)
        if layout.cluster:
            return bool(redis.exists(layout.paused(self.name)))
        return bool(redis.sismember(keys.PAUSED, self.name))

    def pause(self) -> None:
        """Stop every worker from fetching this queue (within 2 s); running jobs finish (PRO-300).
        On a Redis Cluster the queue's flag ``{q:<name>}:paused`` is set instead."""
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

    @overload
    def delete_job(self, jid_or_value: bytes) -> bool: ...

    @overload
    def delete_job(self, jid_or_value: str) -> JobRecord | bool | None: ...

    def delete_job(self, jid_or_value: bytes | str) -> JobRecord | bool | None:
        """Remove a job from this queue.

        * ``delete_job("<jid>")`` (Sidekiq Pro's call): removes, in one atomic
          server-side step, every entry whose payload holds that jid, and
          returns the first one removed as a :class:`JobRecord` (``None`` if
          there was none). An empty jid raises ``ValueError``.
        * ``delete_job(b"<exact stored bytes>")`` (or a ``str`` starting with
          ``{``, i.e. a whole payload): ``LREM`` of exactly that entry;
          returns whether it was there.
        """
        if isinstance(jid_or_value, bytes) or (isinstance(jid_or_value, str) and jid_or_value.startswith("{")):
            return bool(self.redis.lrem(self.rname, 1, jid_or_value))
        if not isinstance(jid_or_value, str):
            raise TypeError(f"delete_job takes a jid (str) or a stored payload (bytes), not {jid_or_value!r}")
        if not jid_or_value.strip():
            raise ValueError(f"delete_job needs a non-empty jid, not {jid_or_value!r}")
        raw = lua("fast_delete_job")(self.redis, [self.rname], _needles("jid", jid_or_value))
        return JobRecord(raw, self.name, redis=self._redis) if raw else None

    def delete_at(self, index: int, value: bytes | str) -> bool:
        """Remove the entry at ``index`` (negative: from the right end) if it still holds
        exactly ``value``; False when that place now holds something else.

        Nothing is downloaded: the entry becomes a tombstone that Redis removes,
        scanning from the nearer end of the list.
        """
        tombstone = f"wurk-deleted:{secrets.token_hex(16)}"
        return bool(lua("queue_delete_at")(self.redis, [self.rname], [index, value, tombstone]))

    def delete_by_class(self, klass: type | str) -> int:
        """Remove every job of this class from the queue in one atomic step; returns how many.

        ``klass`` is a job class (its wire name is used) or the name as stored in
        the payload's ``class`` (e.g. ``"myapp.jobs.SendEmail"`` or Ruby's ``"HardJob"``).
        Only the top-level ``class`` matches: jobs whose ``wrapped`` class is
        ``klass`` are left alone.
        """
        if isinstance(klass, type):
            name = getattr(klass, "job_name", None) or f"{klass.__module__}.{klass.__qualname__}"
        elif isinstance(klass, str):
            name = klass
        else:
            raise TypeError(f"delete_by_class takes a class or a class name, not {klass!r}")
        if not name.strip():
            raise ValueError(f"delete_by_class needs a non-empty class name, not {klass!r}")
        return int(lua("fast_delete_by_class")(self.redis, [self.rname], _needles("class", name)))

    def clear(self) -> bool:
        """Drop every job and forget the queue: ``MULTI UNLINK queue:<n>; SREM queues <n>``.

        On a Redis Cluster the two keys are in different slots: the list goes first,
        then the name, and the name stays while the queue's own ``schedule``, ``retry``
        or ``dead`` set holds entries: the scheduler and the merged views find those
        sets through the queue set only."""
        redis = self.redis
        layout = layout_of(redis)
        if layout.cluster:
            pipe = one_slot(redis, self.rname).pipeline(transaction=True)
            pipe.unlink(self.rname)
            for name in (layout.schedule(self.name), layout.retry(self.name), layout.dead(self.name)):
                pipe.zcard(name)
            _unlinked, *sizes = pipe.execute()
            if not any(sizes):
                redis.srem(layout.queues, self.name)
            return True
        pipe = redis.pipeline(transaction=True)
        pipe.unlink(self.rname)
        pipe.srem(keys.QUEUES, self.name)
        pipe.execute()
        return True
