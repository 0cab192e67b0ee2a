"""Held suspects: jobs running in more than one crash, waiting to go back one at a time (issue 42 item 4).

A job that was running when its process died is a suspect. The first time, the
reaper gives it back at once (counted, :mod:`.poison`); a job suspected again
waits in the dead process's held list (:data:`wurk_django.keys.HELD_SLOT`) so
that it runs with none of its fellow suspects beside it: if it is the poison
pill, it alone crashes the next worker, and the innocents that ran beside it
are not counted a third time with it.

This module keeps what tells where the held jobs are and why they are held:

* ``super_fetch:held``, a sorted set of the held lists that hold jobs, scored by
  when the death that held their first job was found. While it is not empty the
  reaper of a live process reads it every :data:`TICK` seconds and gives back the
  next job of a queue as soon as the one it gave back before finished (its ACK
  deleted its crash count) or crashed again, or :data:`RELEASE_WAIT` seconds
  after it went back. So a held job comes back within seconds of the death being
  found, one at a time.
* ``super_fetch:crashes:<jid>``, the process deaths a job was running in
  (identity and when the reaper found it), for the admin's Held page.

Giving jobs back is the reaper's (:meth:`wurk_django.server.reaper.Reaper.release_held`);
this module reads and notes, and imports nothing of the reaper.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import redis as redis_lib

from .. import keys
from ..redis.scripts import lua
from . import poison

#: Seconds between two looks at the held lists, while some hold jobs.
TICK = 1.0
#: Seconds a suspect given back alone holds back the next one of its queue at most: one
#: still queued or running that long (a long job, a deep queue) lets the next one go.
RELEASE_WAIT = 30
#: Crash notes kept per job.
CRASHES_KEPT = 10

_FORGET = lua("held_forget")


@dataclass(frozen=True)
class Crash:
    """A process death a job was running in: the process (``host:pid:nonce``) and when
    the reaper found it dead (epoch seconds, None when not noted)."""

    process: str
    found_at: float | None


@dataclass(frozen=True)
class HeldJob:
    """A job held back as a poison-pill suspect, as the Held page shows it."""

    queue: str
    held_list: str
    #: The process whose death held it (``host:pid:nonce``).
    process: str
    jid: str | None
    klass: str | None
    raw: bytes
    #: Crashes counted against it so far; the one that held it is counted when it goes back.
    recoveries: int
    #: When its held list was first noted (epoch seconds).
    since: float | None
    #: The deaths it was running in, the oldest first (as far as they were noted).
    crashes: tuple[Crash, ...]


def note_held(redis: redis_lib.Redis, held_lists: list[str], now: float | None = None) -> None:
    """Note ``held_lists`` (which hold jobs) in the index; a list noted before keeps its time."""
    if held_lists:
        redis.zadd(keys.HELD_INDEX, {name: now or time.time() for name in held_lists}, nx=True)


def forget_if_empty(redis: redis_lib.Redis, held_list: str) -> bool:
    """Drop ``held_list`` from the index if it is empty (one script, see ``held_forget.lua``)."""
    return bool(_FORGET(redis, [keys.HELD_INDEX, held_list], []))


def held_lists(redis: redis_lib.Redis) -> list[tuple[str, float]]:
    """(held list, noted at) of every held list in the index, the oldest first."""
    return [(name.decode() if isinstance(name, bytes) else name, float(score))
            for name, score in redis.zrange(keys.HELD_INDEX, 0, -1, withscores=True)]


def note_crashes(redis: redis_lib.Redis, jids: list[str], process: str, now: float | None = None) -> None:
    """Note that the jobs ``jids`` were running when ``process`` died (found ``now``)."""
    if not jids:
        return
    entry = f"{process}|{now or time.time():.3f}"
    pipe = redis.pipeline(transaction=False)
    for jid in jids:
        key = keys.crashes(jid)
        pipe.rpush(key, entry)
        pipe.ltrim(key, -CRASHES_KEPT, -1)
        pipe.expire(key, poison.RECOVERY_TTL)
    pipe.execute()


def _crash(entry: bytes | str) -> Crash:
    text = entry.decode("utf-8", "replace") if isinstance(entry, bytes) else entry
    process, _, at = text.rpartition("|")
    try:
        return Crash(process, float(at))
    except ValueError:
        return Crash(text, None)


def held_jobs(redis: redis_lib.Redis) -> list[HeldJob]:
    """Every held job, by held list (the oldest noted first), the oldest job first."""
    from .reaper import _class_of, parse_private  # reading a private list and its jobs is the reaper's

    jobs: list[HeldJob] = []
    for name, since in held_lists(redis):
        parsed = parse_private(name)
        if parsed is None:
            continue
        public, host, pid, nonce = parsed
        entries = list(reversed(redis.lrange(name, 0, -1)))  # the oldest first
        if not entries:
            continue
        jids = [poison.jid_of(raw) for raw in entries]
        pipe = redis.pipeline(transaction=False)
        for jid in jids:
            if jid:
                pipe.get(keys.recovered(jid))
                pipe.lrange(keys.crashes(jid), 0, -1)
        replies = iter(pipe.execute())
        for raw, jid in zip(entries, jids, strict=True):
            count, notes = (int(next(replies) or 0), next(replies)) if jid else (0, [])
            # The notes since its crash count last started from 0 (an ACK deletes the count,
            # not the notes): its counted crashes and the one that held it.
            crashes = tuple(_crash(note) for note in notes[-(count + 1):])
            klass = _class_of(raw)
            jobs.append(HeldJob(public[len(keys.QUEUE_PREFIX):], name, f"{host}:{pid}:{nonce}", jid,
                                klass if isinstance(klass, str) else None, raw, count, since, crashes))
    return jobs
