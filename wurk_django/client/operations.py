"""Typed write operations: what a round trip of the write path means, before it is commands.

The :class:`~wurk_django.client.writer.Writer` turns jobs into operations, the write
hooks receive the operations of one round trip and return the ones to write
instead, and :func:`commands` (the one serializer) turns them into the Redis
commands of that round trip, wake-up signals included:

* :class:`Enqueue`: push a job onto ``queue:<queue>``;
* :class:`Schedule`: put a job into a sorted set of jobs at a score (``schedule``
  to run it later; retry booking and the data API use ``retry`` and ``dead``);
* :class:`Extra`: any other command a caller or a feature sends in the same round
  trip.

A feature that must write a job its own way (a batch registers the jid and pushes
in one atomic script) keeps the :class:`Enqueue` / :class:`Schedule` and sets its
``via``: the command to send instead of the plain push. Later hooks still see the
job, and the serializer still knows what the round trip pushes.

The bytes of a job are made once, when its operation is made: changing
``op.job`` afterwards changes nothing that is written; a hook that wants other
bytes returns a new operation (:func:`enqueue` / :func:`schedule` from the
changed job).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import keys, payload

Command = tuple[Any, ...]


@dataclass(slots=True)
class Enqueue:
    """Push ``raw`` (the job's bytes) onto ``queue:<queue>``.

    ``front`` pushes it at the end workers take from next (``RPUSH``). ``via``,
    when set, is the command that pushes it instead of ``LPUSH``: a script that
    pushes with the shared snippet (``lua/snippets/push_job.lua``), which writes
    the wake-up tokens itself, so the serializer writes none for it.
    """

    queue: str
    raw: bytes
    job: dict | None = None
    front: bool = False
    via: Command | None = None


@dataclass(slots=True)
class Schedule:
    """Add ``raw`` to the sorted set ``into`` with score ``at`` (epoch seconds).

    ``job`` is ``None`` for stored bytes (or text) passed on without being parsed. ``via``,
    when set, is the command that adds it instead of ``ZADD``; an entry of
    ``schedule`` or ``retry`` is announced to the schedulers either way.
    """

    at: float
    raw: bytes | str
    job: dict | None = None
    into: str = keys.SCHEDULE
    via: Command | None = None


@dataclass(slots=True)
class Extra:
    """Any other command, sent where it stands in the round trip."""

    command: Command


Operation = Enqueue | Schedule | Extra


def enqueue(job: dict, *, front: bool = False) -> Enqueue:
    """The push of ``job`` as it is (``enqueued_at`` already stamped)."""
    return Enqueue(job["queue"], payload.dumps(job), job, front)


def schedule(job: dict) -> Schedule:
    """The scheduling of ``job`` at its ``at``. The set holds the job without
    ``at``/``enqueued_at``: ``enqueued_at`` is stamped when it is promoted."""
    body = {k: v for k, v in job.items() if k not in ("at", "enqueued_at")}
    return Schedule(float(job["at"]), payload.dumps(body), job)


def for_jobs(jobs: list[dict], *, front: bool = False, now_ms: int | None = None,
             wire: payload.WireFormat = payload.SIDEKIQ8) -> list[Operation]:
    """The operations for normalized jobs, in their order: a :class:`Schedule` for
    those with an ``at``, an :class:`Enqueue` for the others, whose ``enqueued_at``
    is stamped now (``now_ms`` if given, in the unit of ``wire``) (CORE-083/084)."""
    ops: list[Operation] = []
    add, dumps = ops.append, payload.dumps  # this loop runs for every job pushed
    now = None
    for job in jobs:
        if "at" in job:
            add(schedule(job))
        else:
            if now is None:
                if now_ms is None:
                    now = wire.now()
                else:
                    now = now_ms / 1000 if wire.float_seconds else now_ms
            job["enqueued_at"] = now
            add(Enqueue(job["queue"], dumps(job), job, front))
    return ops


def jobs(ops: list[Operation]) -> list[dict]:
    """The parsed jobs the operations write (stored bytes passed on as they are have none)."""
    return [op.job for op in ops if type(op) is not Extra and op.job is not None]


def commands(ops: list[Operation], db: int | str = 0, *, wake_lists: bool = True) -> list[Command]:
    """The commands of one round trip for ``ops``: the only place a push becomes
    ``ZADD``/``SADD queues``/``LPUSH`` and its wake-up signals.

    Extras stay where they stand. The pushes are written together where the first
    of them stands: one ``ZADD`` per set, the ``via`` commands of scheduled jobs,
    ``SADD queues`` with every queue pushed to, one ``LPUSH`` per queue (then one
    ``RPUSH`` per queue for ``front`` pushes), the ``via`` commands of pushed jobs.
    The wake-up signals come last (:func:`wake_commands`), so the pushes land first;
    ``wake_lists=False`` leaves out the wake-up lists' tokens (no fetcher waits on them:
    :mod:`wurk_django.wake_demand`), not the scheduler's signal.
    """
    if len(ops) == 1:
        # One job pushed now (``perform_async``): what the loop below makes for it, made directly.
        op = ops[0]
        if type(op) is Enqueue and op.via is None:
            queue = op.queue
            out = [("SADD", keys.QUEUES, queue), ("RPUSH" if op.front else "LPUSH", keys.queue(queue), op.raw)]
            return out + wake_commands({queue: 1}, None, db) if wake_lists else out
    out: list[Command] = []
    at = -1  # where the pushes go in ``out``
    sets: dict[str, list[Any]] = {}
    backs: dict[str, list[bytes]] = {}  # LPUSH, per queue
    fronts: dict[str, list[bytes]] = {}  # RPUSH, per queue
    scheduled_via: list[Command] = []
    pushed_via: list[Command] = []
    earliest: float | None = None
    for op in ops:
        kind = type(op)
        if kind is Extra:
            out.append(op.command)
            continue
        if at < 0:
            at = len(out)
        if kind is Enqueue:
            if op.via is not None:
                pushed_via.append(op.via)  # the script writes its own wake-up tokens
                continue
            lists = fronts if op.front else backs
            found = lists.get(op.queue)
            if found is None:
                lists[op.queue] = [op.raw]
            else:
                found.append(op.raw)
        else:
            if op.via is not None:
                scheduled_via.append(op.via)
            else:
                members = sets.get(op.into)
                if members is None:
                    sets[op.into] = [op.at, op.raw]
                else:
                    members += (op.at, op.raw)
            if op.into in (keys.SCHEDULE, keys.RETRY) and (earliest is None or op.at < earliest):
                earliest = op.at
    if at < 0:
        return out
    woken = {queue: len(raws) for queue, raws in backs.items()}  # jobs per queue pushed to
    for queue, raws in fronts.items():
        woken[queue] = woken.get(queue, 0) + len(raws)
    block: list[Command] = [("ZADD", name, *members) for name, members in sets.items()]
    block += scheduled_via
    if woken:
        block.append(("SADD", keys.QUEUES, *woken))
        block += [("LPUSH", keys.queue(queue), *raws) for queue, raws in backs.items()]
        block += [("RPUSH", keys.queue(queue), *raws) for queue, raws in fronts.items()]
    block += pushed_via
    out[at:at] = block
    if not wake_lists:
        if earliest is None:
            return out
        woken = {}
    return out + wake_commands(woken, earliest, db)


def wake_commands(woken: dict[str, int], earliest: float | None, db: int | str = 0) -> list[Command]:
    """The wake-up signals of one round trip, sent after its pushes.

    * per queue pushed to (``woken``: queue -> jobs pushed): up to
      :data:`keys.WAKE_TOKENS_MAX` tokens on ``wake:<queue>`` (one per job), which
      an idle fetcher serving several queues blocks on: no blocking move can take
      from more than one list, so the token says "look again now". The list is
      trimmed and expires, so nobody listening costs nothing lasting. Scripts that
      push write the same tokens (``lua/snippets/push_job.lua``);
    * the ``earliest`` score added to ``schedule``/``retry``, published on
      ``wake-schedule:<db>``, so a sleeping scheduler can wake in time.

    A lost signal only costs time: fetchers and schedulers still poll as before. The
    writer asks for the tokens only while a fetcher waits on them (wurk_django.wake_demand).
    """
    out: list[Command] = []
    for queue, count in woken.items():
        key = keys.wake(queue)
        out += [("LPUSH", key, *("1",) * min(count, keys.WAKE_TOKENS_MAX)),
                ("LTRIM", key, 0, keys.WAKE_TOKENS_MAX - 1), ("EXPIRE", key, keys.WAKE_TTL)]
    if earliest is not None:
        out.append(("PUBLISH", keys.schedule_wake_channel(db), repr(float(earliest))))
    return out


def wake_args() -> list[int]:
    """The ``ARGV`` a pushing script passes to the snippet's ``wake_fetchers``:
    the most tokens a wake-up list keeps, and their time to live."""
    return [keys.WAKE_TOKENS_MAX, keys.WAKE_TTL]
