"""The three job sorted sets ``schedule``, ``retry`` and ``dead`` and their entries
(CORE-165, CORE-166, CORE-141).

On a Redis Cluster (issue 46 item 3) each queue has its own three sets
(``{q:<name>}:schedule`` ...: :mod:`wurk_django.redis.cluster_layout`), so a
:class:`ScheduledSet`, :class:`RetrySet` or :class:`DeadSet` is the merge of every
known queue's set (the names in ``{wurk}:queues``): sizes are summed, iteration
and lookups merge by score as one set would order them, and an action on an
entry goes to the set it was read from. Each read costs one command per known
queue (pipelined: one round trip per primary).
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from .. import context, death, keys, payload
from ..client.push import Client
from ..client.writer import Writer
from ..redis.cluster_layout import known_queues, layout_of
from ._base import PAGE_SIZE, RedisClient, cluster_aware, epoch, one_slot, utc
from .record import JobRecord

__all__ = ["SortedEntry", "SortedSet", "JobSet", "ScheduledSet", "RetrySet", "DeadSet"]

Score = float | int | datetime


def _job_dict(raw: bytes | str) -> dict | None:
    try:
        job = payload.loads(raw)
    except Exception:  # a raw string in the morgue is legal (CORE-054)
        return None
    return job if isinstance(job, dict) else None


def _prepare_repush(job: dict, *, manual_retry: bool) -> dict:
    """The payload to hand back to the client for an immediate push."""
    job = dict(job)
    # A stray ``at`` from old data would send the job back to ``schedule``; the
    # person asked for it to run now (CORE-018).
    job.pop("at", None)
    count = job.get("retry_count")
    if manual_retry and isinstance(count, int) and not isinstance(count, bool):
        # A manual retry must not use up one of the job's automatic retries (CORE-128).
        job["retry_count"] = count - 1
    return job


class SortedEntry(JobRecord):
    """A job in one of the sorted sets, with its score (epoch seconds)."""

    def __init__(self, parent: JobSet, score: float, value: bytes | str | dict,
                 redis: RedisClient | None = None, key: str | None = None) -> None:
        super().__init__(value, redis=redis if redis is not None else parent._redis)
        self.parent = parent
        self.score = float(score)
        # Built from a dict, ``value`` is our serialization, not necessarily the stored bytes.
        self._exact = not isinstance(value, dict)
        self._key = key

    @property
    def set_key(self) -> str:
        """The key this entry is in: the parent's set on one server; on a cluster its
        queue's own set (the one it was read from, else the payload's queue's)."""
        if self._key is None:
            self._key = self.parent.key_for(self)
        return self._key

    @property
    def queue(self) -> str | None:
        return self.item.get("queue")

    @property
    def at(self) -> datetime:
        """The score as an aware UTC datetime (run time, next retry or death time)."""
        return utc(self.score)  # type: ignore[return-value]

    @property
    def id(self) -> str:
        """``"<score>|<jid>"`` as Sidekiq builds it."""
        return f"{payload.score(self.score)}|{self.jid}"

    @property
    def key(self) -> str:
        """``"<score>-<jid>"``, the form used in Web UI URLs (CORE-182)."""
        return f"{payload.score(self.score)}-{self.jid}"

    @property
    def error(self) -> bool:
        """Whether the job carries a recorded failure."""
        return "error_class" in self.item

    def __repr__(self) -> str:
        return f"<SortedEntry {self.parent.name} {self.id} {self.display_class}>"

    # -- actions -------------------------------------------------------------------

    def delete(self) -> bool:
        """Remove the entry: ``ZREM`` of the stored bytes (CORE-004); an entry built
        from a dict is looked up by score and jid instead. A unique job's lock goes
        with it when the job held it, so the next identical push is not dropped."""
        if self._exact:
            deleted = bool(self.redis.zrem(self.set_key, self.value))
        else:
            deleted = self.parent.delete_by_jid(self.score, self.jid)
        if deleted:
            from ..unique.unlock import release_deleted  # lazy: only a delete pays for it

            release_deleted(self.redis, self.item)
        return deleted

    def reschedule(self, at: Score) -> bool:
        """Move the entry to a new time by adding ``at - score`` to its score.

        ``XX`` makes this a no-op when the entry is already gone, where a bare
        ``ZINCRBY`` would re-create it with a meaningless score.
        """
        delta = epoch(at) - self.score
        new_score = self.redis.zadd(self.set_key, {self.value: delta}, xx=True, incr=True)
        if new_score is None:
            return False
        self.score = float(new_score)
        return True

    def add_to_queue(self) -> bool:
        """Push the job to its queue now, unchanged. False if someone else got it first."""
        return self._move(manual_retry=False)

    def retry(self) -> bool:
        """Push the job to its queue now with ``retry_count`` one lower (CORE-128).
        False if the entry was already gone."""
        return self._move(manual_retry=True)

    def kill(self) -> bool:
        """Move the entry to the dead set (death handlers run, the set is trimmed)."""
        raw = self._take()
        if raw is None:
            return False
        DeadSet(redis=self._redis).kill(raw)
        return True

    def _move(self, *, manual_retry: bool) -> bool:
        if self.parse_error:
            raise ValueError(f"cannot push an unparseable job from {self.parent.name}: {self.value[:200]!r}")
        raw = self._take()
        if raw is None:
            return False
        job = _job_dict(raw)
        if job is None:  # the same score now holds something unreadable: keep it where it was
            self.redis.zadd(self.set_key, {raw: self.score})
            raise ValueError(f"cannot push an unparseable job from {self.parent.name}: {raw[:200]!r}")
        try:
            # Through the normal client: middleware runs, ``enqueued_at`` is renewed,
            # jid and created_at stay (CORE-130).
            jid = Client(redis=self._redis).push(_prepare_repush(job, manual_retry=manual_retry))
        except BaseException:
            self.redis.zadd(self.set_key, {raw: self.score})
            raise
        if jid is None:
            # A client middleware stopped the push: the entry stays where it was.
            self.redis.zadd(self.set_key, {raw: self.score})
            raise NotPushed(refusal(self.redis, job))
        return True

    def _take(self) -> bytes | None:
        """Atomically remove this entry and return its stored bytes, or ``None`` if
        another caller already took it (CORE-165).

        Every member at this exact score is removed in one MULTI; those that are not
        ours are put back at the same score. Two concurrent clicks therefore cannot
        both get the job.
        """
        name = self.set_key
        redis = one_slot(self.redis, name)  # on a cluster: the node of the set's slot
        pipe = redis.pipeline(transaction=True)
        pipe.zrange(name, self.score, self.score, byscore=True)
        pipe.zremrangebyscore(name, self.score, self.score)
        members, _removed = pipe.execute()
        if not members:
            return None
        index: int | None = None
        if self._exact and self.value in members:
            index = members.index(self.value)
        elif not self._exact and self.jid:
            # We never held the stored bytes (built from a dict): identify by jid.
            needle = self.jid.encode()
            for i, member in enumerate(members):
                if needle in member and (_job_dict(member) or {}).get("jid") == self.jid:
                    index = i
                    break
        others = [m for i, m in enumerate(members) if i != index]
        if others:
            back = redis.pipeline(transaction=True)
            back.zadd(name, dict.fromkeys(others, self.score))
            back.execute()
        return members[index] if index is not None else None


class NotPushed(Exception):
    """A retry or enqueue was stopped by a client middleware; the entry was kept.
    The message says why, as far as it can be known (a unique job's lock)."""


def refusal(redis: RedisClient, job: dict) -> str:
    """Why a push of ``job`` was most likely stopped, in words."""
    from ..unique.unlock import digest_of, holder

    digest = digest_of(job)
    if digest is not None:
        queue = job.get("queue")  # on a Redis Cluster the lock lives in the queue's slot
        held_by = holder(redis, digest, queue if isinstance(queue, str) and queue else "default")
        if held_by and held_by != job.get("jid"):
            return (f"{job.get('class')} jid={job.get('jid')} was not pushed: an identical unique job "
                    f"(jid={held_by}) holds its lock {digest}; the entry was kept")
    return f"{job.get('class')} jid={job.get('jid')} was not pushed: a client middleware stopped it; the entry was kept"


class SortedSet:
    """Read access shared by the job sorted sets."""

    name: str = ""
    #: The layout method naming a queue's own set on a cluster (``"schedule"``, ``"retry"``,
    #: ``"dead"``); ``None``: a set of that one name everywhere.
    per_queue: str | None = None

    def __init__(self, name: str | None = None, redis: RedisClient | None = None) -> None:
        if name is not None:
            self.name = name
            self.per_queue = None
        self._redis = redis

    @property
    def redis(self) -> RedisClient:
        return cluster_aware(self._redis)

    def keys(self) -> list[str]:
        """The keys this set reads: ``[name]``; on a cluster, every known queue's own set."""
        redis = self.redis
        layout = layout_of(redis)
        if self.per_queue is None or not layout.cluster:
            return [self.name]
        name_of = getattr(layout, self.per_queue)
        return [name_of(queue) for queue in known_queues(redis)]

    def merged(self) -> bool:
        """Whether this set is the merge of per-queue sets (a Redis Cluster)."""
        return self.per_queue is not None and layout_of(self.redis).cluster

    def key_for(self, job: dict | JobRecord | None) -> str:
        """The key holding an entry of ``job``: ``name``, or on a cluster the set of the
        job's queue (``default`` for an entry without one, as the dead set files it)."""
        if not self.merged():
            return self.name
        if isinstance(job, JobRecord):
            job = job.item
        queue = job.get("queue") if isinstance(job, dict) else None
        queue = queue if isinstance(queue, str) and queue else "default"
        return getattr(layout_of(self.redis), self.per_queue)(queue)  # type: ignore[arg-type]

    def _counts(self, names: list[str]) -> list[int]:
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.zcard(name)
        return [int(n) for n in pipe.execute()] if names else []

    @property
    def size(self) -> int:
        if self.merged():
            return sum(self._counts(self.keys()))
        return int(self.redis.zcard(self.name))

    def __len__(self) -> int:
        return self.size

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"

    def clear(self) -> bool:
        """Remove every entry (``UNLINK``; on a cluster one per queue's set)."""
        if self.merged():
            for name in self.keys():
                self.redis.unlink(name)
            return True
        self.redis.unlink(self.name)
        return True

    def _entry(self, score: float, value: bytes, key: str | None = None) -> SortedEntry:
        return SortedEntry(self, score, value, key=key)  # type: ignore[arg-type]

    def scan(self, match: str, count: int = 100,
             callback: Callable[[SortedEntry], Any] | None = None) -> Iterator[SortedEntry] | int:
        """Entries whose JSON contains ``match`` (``ZSCAN``; ``*`` in ``match`` = your own glob).

        Without ``callback``: a generator of entries. With one (Sidekiq Pro's
        block form): ``callback(entry)`` for each, at once, and the number of
        entries seen is returned; an entry may ``delete()``, ``retry()`` or
        ``kill()`` itself from the callback.
        """
        if not isinstance(match, str) or not match:
            raise ValueError(f"scan needs a non-empty text to match, not {match!r}")
        entries = self._scan(match, count)
        if callback is None:
            return entries
        seen = 0
        for entry in entries:
            callback(entry)
            seen += 1
        return seen

    def _scan(self, match: str, count: int) -> Iterator[SortedEntry]:
        pattern = match if "*" in match else f"*{match}*"
        for name in self.keys():
            for value, score in self.redis.zscan_iter(name, match=pattern, count=count):
                yield self._entry(score, value, name)


class JobSet(SortedSet):
    """A sorted set of jobs: iteration, lookups, and moving jobs out of it."""

    def __iter__(self) -> Iterator[SortedEntry]:
        """Every entry, highest score first, ``PAGE_SIZE`` per round trip.

        Pages are counted from the high end; when entries disappear meanwhile the
        window moves back by that many so none is skipped. On a cluster each queue's
        set is read so, and the entries merged, highest score first.
        """
        if not self.merged():
            yield from self._iter_key(self.name)
            return
        # Ties by member, highest first, as ZRANGE orders them on one set.
        yield from heapq.merge(*(self._iter_key(name) for name in self.keys()),
                               key=lambda entry: (entry.score, entry.value), reverse=True)

    def _iter_key(self, name: str) -> Iterator[SortedEntry]:
        redis = self.redis
        initial = int(redis.zcard(name))
        page = 1
        shift = 0
        while True:
            end = min(-(page - 1) * PAGE_SIZE - 1 + shift, -1)
            start = min(-page * PAGE_SIZE + shift, end)
            elements = redis.zrange(name, start, end, withscores=True)
            if not elements:
                return
            page += 1
            for value, score in reversed(elements):
                yield self._entry(score, value, name)
            shift = initial - int(redis.zcard(name))

    def window(self, start: int, count: int, *, desc: bool) -> tuple[int, list[SortedEntry]]:
        """``(size, entries)``: ``count`` entries from rank ``start`` (highest score first
        when ``desc``), in one round trip (``ZCARD`` and ``ZRANGE`` by rank). On a cluster
        the first ``start + count`` of each queue's set are read and merged, so a deep
        page costs more there."""
        if not self.merged():
            pipe = self.redis.pipeline(transaction=False)
            pipe.zcard(self.name)
            pipe.zrange(self.name, start, start + count - 1, desc=desc, withscores=True)
            size, elements = pipe.execute()
            return int(size), [self._entry(score, value) for value, score in elements]
        names = self.keys()
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.zcard(name)
            pipe.zrange(name, 0, start + count - 1, desc=desc, withscores=True)
        replies = pipe.execute() if names else []
        size = sum(int(n) for n in replies[0::2])
        rows = [(score, value, name) for name, elements in zip(names, replies[1::2], strict=True)
                for value, score in elements]
        rows.sort(key=lambda row: (row[0], row[1]), reverse=desc)
        return size, [self._entry(score, value, name) for score, value, name in rows[start:start + count]]

    def walk(self, chunk: int, *, desc: bool) -> Iterator[SortedEntry]:
        """Every entry in display order, ``chunk`` per ``ZRANGE`` by rank (per queue's set
        on a cluster, merged): memory stays bounded by one chunk per set."""
        if not self.merged():
            yield from self._walk_key(self.name, chunk, desc)
            return
        yield from heapq.merge(*(self._walk_key(name, chunk, desc) for name in self.keys()),
                               key=lambda entry: (entry.score, entry.value), reverse=desc)

    def _walk_key(self, name: str, chunk: int, desc: bool) -> Iterator[SortedEntry]:
        rank = 0
        while True:
            elements = self.redis.zrange(name, rank, rank + chunk - 1, desc=desc, withscores=True)
            for value, score in elements:
                yield self._entry(score, value, name)
            if len(elements) < chunk:
                return
            rank += chunk

    def schedule(self, at: Score, job: dict | bytes | str) -> None:
        """Add a job at time ``at`` (epoch seconds or datetime), through the write path."""
        Writer(redis=self._redis).add_to_set(self.name, [(job, epoch(at))])

    def fetch(self, score: Score | tuple[Score, Score], jid: str | None = None) -> list[SortedEntry]:
        """Entries at one score, or within an inclusive ``(low, high)`` range;
        only those with ``jid`` if given (CORE-182 lookups)."""
        if isinstance(score, (tuple, list)):
            low, high = epoch(score[0]), epoch(score[1])
        else:
            low = high = epoch(score)
        if self.merged():
            names = self.keys()
            pipe = self.redis.pipeline(transaction=False)
            for name in names:
                pipe.zrange(name, low, high, byscore=True, withscores=True)
            found = [(s, v, name) for name, elements in zip(names, pipe.execute() if names else [], strict=True)
                     for v, s in elements]
            found.sort(key=lambda row: (row[0], row[1]))
            entries = [self._entry(s, v, name) for s, v, name in found]
        else:
            elements = self.redis.zrange(self.name, low, high, byscore=True, withscores=True)
            entries = [self._entry(s, v) for v, s in elements]
        if jid is not None:
            entries = [e for e in entries if e.jid == jid]
        return entries

    def find_job(self, jid: str) -> SortedEntry | None:
        """The entry with this jid (``ZSCAN MATCH *jid*``, then an exact jid check)."""
        for entry in self._scan(jid, 100):
            if entry.jid == jid:
                return entry
        return None

    def delete_by_value(self, value: bytes | str) -> bool:
        """``ZREM`` of exact stored bytes (CORE-004); on a cluster from the set of the
        entry's queue, else (an unreadable entry) from whichever set holds it."""
        if not self.merged():
            return bool(self.redis.zrem(self.name, value))
        job = _job_dict(value)
        names = [self.key_for(job)] if job is not None else self.keys()
        return any(bool(self.redis.zrem(name, value)) for name in names)

    def delete_by_jid(self, score: Score, jid: str | None) -> bool:
        """Remove the member at ``score`` whose jid matches."""
        for entry in self.fetch(score, jid):
            if self.redis.zrem(entry.set_key, entry.value):
                return True
        return False

    def pop_each(self) -> Iterator[tuple[bytes, float, str]]:
        """``(stored bytes, score, key)`` of each entry, lowest score first, taken one
        by one (``ZPOPMIN``; on a cluster, one queue's set after another), bounded by
        the starting size. What a caller does not keep goes back with :meth:`put_back`."""
        # Bounded by the starting size so jobs added meanwhile (e.g. a retry that
        # fails again at once) cannot keep the loop going forever.
        redis = self.redis
        names = self.keys()
        counts = [self.size] if not self.merged() else self._counts(names)
        for name, count in zip(names, counts, strict=True):
            for _ in range(count):
                popped = redis.zpopmin(name, 1)
                if not popped:
                    break
                value, score = popped[0]
                yield value, float(score), name

    def put_back(self, entries: dict[str, dict[bytes, float]]) -> None:
        """``ZADD`` each key's ``{member: score}`` back (members :meth:`pop_each` took)."""
        for name, members in entries.items():
            if members:
                self.redis.zadd(name, members)

    def _pop_each(self) -> Iterator[tuple[bytes, float]]:
        for value, score, _name in self.pop_each():
            yield value, score

    def retry_all(self, refused: list[str] | None = None) -> int:
        """Push every job to its queue now, lowering ``retry_count`` (CORE-128).

        Not transactional: jobs are popped one by one (``ZPOPMIN``) and pushed
        through the client. Members that are unparseable, that the client
        rejects as invalid, or whose push a middleware stopped (a unique job whose
        lock an identical pending job holds) are put back, so one bad entry does
        not block the rest; the reasons for stopped pushes are appended to
        ``refused`` when given. Returns how many jobs were pushed.
        """
        client = Client(redis=self._redis)
        unreadable: dict[str, dict[bytes, float]] = {}
        pushed = 0
        try:
            for raw, score, name in self.pop_each():
                job = _job_dict(raw)
                if job is None:
                    unreadable.setdefault(name, {})[raw] = score
                    continue
                try:
                    jid = client.push(_prepare_repush(job, manual_retry=True))
                except ValueError:
                    unreadable.setdefault(name, {})[raw] = score
                    continue
                except BaseException:
                    unreadable.setdefault(name, {})[raw] = score  # not lost: it goes back below
                    raise
                if jid is None:
                    unreadable.setdefault(name, {})[raw] = score
                    if refused is not None:
                        refused.append(refusal(self.redis, job))
                    continue
                pushed += 1
        finally:
            self.put_back(unreadable)
        return pushed

    def kill_all(self, notify_failure: bool = False, ex: BaseException | None = None) -> int:
        """Move every job to the dead set, trimming it once at the end. Returns the count."""
        dead = DeadSet(redis=self._redis)
        moved = 0
        try:
            for raw, _score in self._pop_each():
                dead.kill(raw, notify_failure=notify_failure, trim=False, ex=ex)
                moved += 1
        finally:
            dead.trim()
        return moved


class ScheduledSet(JobSet):
    """``schedule``: jobs waiting for their time (score = run at)."""

    name = keys.SCHEDULE
    per_queue = "schedule"

    def __init__(self, redis: RedisClient | None = None) -> None:
        super().__init__(redis=redis)


class RetrySet(JobSet):
    """``retry``: failed jobs waiting for their next attempt (score = next retry)."""

    name = keys.RETRY
    per_queue = "retry"

    def __init__(self, redis: RedisClient | None = None) -> None:
        super().__init__(redis=redis)


class DeadSet(JobSet):
    """``dead`` (the morgue): jobs that will not be retried (score = death time)."""

    name = keys.DEAD
    per_queue = "dead"

    def __init__(self, redis: RedisClient | None = None) -> None:
        super().__init__(redis=redis)

    def kill(self, message: bytes | str | dict, notify_failure: bool = True, trim: bool = True,
             ex: BaseException | None = None) -> bool:
        """Add a job to the morgue now (CORE-141): ``ZADD`` plus both trims in one
        MULTI unless ``trim`` is false; then the death handlers get the parsed job
        and ``ex`` (default ``RuntimeError("Job killed by API")``) unless
        ``notify_failure`` is false."""
        raw = payload.dumps(message) if isinstance(message, dict) else message
        error = ex if ex is not None else death.JobKilled()
        death.die(death.parse_or_raw(raw), error, reason=death.MANUAL, config=context.config(), redis=self.redis,
                  raw=raw, trim=trim, notify=notify_failure)
        return True

    def trim(self) -> None:
        """Drop entries older than ``dead_timeout_in_seconds`` and keep the newest
        ``dead_max_jobs - 1`` (the rank trim exactly as Sidekiq issues it, CORE-140). On a
        cluster each queue's dead set is trimmed so (the limit applies per queue there)."""
        config = context.config()
        now = time.time()
        for name in self.keys():
            pipe = one_slot(self.redis, name).pipeline(transaction=True)
            pipe.zremrangebyscore(name, "-inf", now - config.dead_timeout)
            pipe.zremrangebyrank(name, 0, -config.dead_max_jobs)
            pipe.execute()

