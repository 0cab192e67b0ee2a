"""Pushes on a Redis Cluster (issue 46 stage 2): the write path's operations in the
cluster layout (:mod:`wurk_django.redis.cluster_layout`).

The :class:`~wurk_django.client.writer.Writer` hands its operations here instead of
to :func:`wurk_django.client.operations.commands` when its Redis is a cluster node:

* a job pushed now goes onto its queue's list ``{q:<name>}:queue``, with the
  wake-up tokens on ``{q:<name>}:wake`` (the same slot);
* a job for later (``perform_in``/``perform_at``, a retry booked, a death) goes into
  *its queue's own* ``schedule``/``retry``/``dead`` set, in the queue's slot, so the
  scheduler promotes it with a one-slot script;
* the queue set ``{wurk}:queues`` is told about a queue the first time this process
  pushes to it and then at most once per :data:`~wurk_django.redis.cluster_layout.QUEUE_SET_REFRESH`
  seconds: one ``SADD`` per push would make the ``{wurk}`` slot as hot as every queue together.

Commands are sent in one redis-py cluster pipeline: each goes to the primary owning
its key, ``MOVED``/``ASK`` followed.

What a push writes *beside* the job (issue 46 item 3) lives in other slots than the
job's queue, so it cannot share the job's atomic step as on one server. It is sent in a
round trip of its own, answered, *before* the jobs' round trip: whatever it records
(a tracked job's first status record, a batch's registration of the jid) exists before
any worker can fetch the job, and a crash between the two leaves a record of a job that
was never pushed, never a job its record or its batch misses. So:

* an :class:`~wurk_django.client.operations.Extra` command is accepted when it touches
  one slot (a single-key command of :data:`SINGLE_KEY`, or a script whose declared keys
  share a slot);
* a job whose operation has a ``via`` (a feature's pushing script) is accepted when that
  feature registered a *split* for its script (:func:`register_split`): the commands to
  send first, after which the job is pushed plainly (a batch: :mod:`wurk_django.batch.cluster`);
  or a *form* (:func:`register_form`): the same script with the cluster layout's keys, all
  in the job's queue's slot, which writes the job itself in the jobs' round trip, and the
  commands to send after it from its reply (a debounced push:
  :func:`wurk_django.policies.client.cluster_form`);
* a job pushed now whose ``via`` is a script with every declared key in the slot of the
  job's queue is sent as it is, in the jobs' round trip instead of the job's ``LPUSH``:
  the script pushes the job and writes its wake-up tokens itself, as on one server (a
  workflow step's claim-and-push: :mod:`wurk_django.workflow.cluster`).

Anything else is refused before anything is sent, with
:class:`~wurk_django.errors.RedisClusterError` naming it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from time import monotonic
from typing import Any

import redis as redis_lib
from redis.crc import key_slot

from .. import keys, payload
from ..conf import Config
from ..errors import RedisClusterError
from ..redis import cluster
from ..redis.cluster_layout import CLUSTER, QUEUE_SET_REFRESH
from ..redis.scripts import source_for_sha
from .operations import Command, Enqueue, Extra, Operation, Schedule

#: Commands taking exactly one key, first: a companion command made of them is one slot.
SINGLE_KEY = frozenset({"HSET", "HSETNX", "HDEL", "HINCRBY", "EXPIRE", "PEXPIRE", "SET", "DEL", "SADD", "SREM",
                        "ZADD", "ZREM", "LPUSH", "RPUSH", "INCR", "INCRBY"})

Split = Callable[[Operation], list[Command]]
#: What to do once a split job was written, from the replies of its split's commands:
#: ``after(client, op, replies)`` (:func:`register_split`).
AfterSplit = Callable[[Any, Operation, list[Any]], None]
#: A feature's pushing script (by its SHA-1) -> the commands to send before its job is
#: pushed plainly on a cluster, and what to do after (:func:`register_split`).
_splits: dict[str, Split] = {}
_after_splits: dict[str, AfterSplit] = {}


def register_split(sha: str, split: Split, after: AfterSplit | None = None) -> None:
    """On a cluster, a job whose ``via`` runs the script ``sha`` is written as
    ``split(op)``'s commands (one slot each, sent and answered first), then the job's
    plain push: how a feature whose one-server script pushes and books atomically
    keeps its bookkeeping before the job exists (issue 46 item 3). ``after``, if given,
    is called once the job is written, with the client, the operation and the replies
    of its split's commands: for what the one-server script also did in another slot."""
    _splits[sha] = split
    if after is not None:
        _after_splits[sha] = after
    else:
        _after_splits.pop(sha, None)


@dataclass(frozen=True, slots=True)
class Formed:
    """A job's write on a cluster by a feature's script (:func:`register_form`): ``command``
    (its keys in the slot of ``queue``, the job's queue) writes the job in the jobs' round
    trip; ``after(reply)``, if given, the commands to send once that round trip answered
    (each one slot), from the script's reply."""

    command: Command
    queue: str
    after: Callable[[Any], list[Command]] | None = None


Form = Callable[[Operation], Formed]
#: A feature's pushing script (by its SHA-1) -> its cluster form (:func:`register_form`).
_forms: dict[str, Form] = {}


def register_form(sha: str, form: Form) -> None:
    """On a cluster, a job whose ``via`` runs the script ``sha`` is written by ``form(op)``:
    the script's command with the cluster layout's keys (one slot, the job's queue's), sent
    in place of the job's plain write, and what to send after from its reply. For a feature
    whose one-server script writes the job with keys a cluster can hold in one slot."""
    _forms[sha] = form


def _in_queue_slot(op: Operation) -> bool:
    """Whether ``op`` is a push now through a script whose declared keys are all in the
    slot of the job's own queue (sent as it is on a cluster)."""
    if type(op) is not Enqueue or op.via is None or str(op.via[0]).upper() not in ("EVALSHA", "EVAL"):
        return False
    count = int(op.via[2])
    slot = key_slot(CLUSTER.queue(op.queue).encode())
    return count > 0 and all(key_slot(_bytes(k)) == slot for k in op.via[3:3 + count])


def _formed(op: Operation) -> bool:
    return (type(op) is not Extra and op.via is not None and str(op.via[0]).upper() == "EVALSHA"
            and op.via[1] in _forms)


def _one_slot(command: Command) -> bool:
    """Whether a companion command touches keys of one slot only."""
    name = str(command[0]).upper()
    if name in SINGLE_KEY:
        return len(command) > 1
    if name in ("EVALSHA", "EVAL"):
        count = int(command[2])
        return count > 0 and len({key_slot(_bytes(k)) for k in command[3:3 + count]}) == 1
    return False


def _bytes(key: Any) -> bytes:
    return key if isinstance(key, bytes) else str(key).encode()

#: The one-server set each kind of scheduled entry is named by, and its per-queue twin.
_SETS = {keys.SCHEDULE: CLUSTER.schedule, keys.RETRY: CLUSTER.retry, keys.DEAD: CLUSTER.dead}

#: When this process last told each cluster's queue set about a queue:
#: ``(pid, target identity, queue) -> monotonic()``. Only grows by queue names pushed to.
_registered: dict[tuple[int, str, str], float] = {}


def refusal(ops: list[Operation], url: str) -> RedisClusterError | None:
    """The error for the first operation a cluster cannot take yet (``None``: every one can)."""
    for op in ops:
        kind = type(op)
        if kind is Extra:
            if not _one_slot(op.command):
                name = str(op.command[0]).upper()
                return cluster.not_yet(f"A push with companion commands spanning hash slots ({name}: a feature "
                                       f"writing beside the job not converted yet)", url)
            continue
        if op.via is not None and not (str(op.via[0]).upper() == "EVALSHA"
                                       and (op.via[1] in _splits or op.via[1] in _forms)) \
                and not _in_queue_slot(op):
            return cluster.not_yet(f"A push through a feature's script ({str(op.via[0]).upper()}: push policies "
                                   f"such as limiters)", url)
        if kind is Schedule and op.into not in _SETS:
            return cluster.not_yet(f"A job added to the set {op.into!r}", url)
    return None


def _queue_of(op: Schedule) -> str:
    """The queue whose sets take ``op``'s entry: on a cluster every set is a queue's own."""
    try:
        job = op.job if op.job is not None else payload.loads(op.raw)
        queue = job["queue"]
    except (ValueError, TypeError, KeyError):
        queue = None
    if type(queue) is not str or not queue:
        raise ValueError(f"an entry for {op.into!r} without a queue name cannot be placed on a Redis Cluster "
                         f"(each queue has its own set there): {op.raw[:200]!r}")
    return queue


def commands(ops: list[Operation], identity: str, *, now: float | None = None,
             formed: Sequence[Formed] = ()) -> tuple[list[Command], list[str]]:
    """The commands of one round trip for ``ops`` (checked by :func:`refusal`) in the cluster
    layout, and the queues whose registration in the queue set they include: the commands of
    ``formed`` (the writes of :func:`register_form` features, first, in order), the pushes
    (``ZADD`` per set, ``LPUSH``/``RPUSH`` per queue, the pushing scripts in a queue's own
    slot), the ``SADD`` of queues this process has not registered lately, then the wake-up
    tokens of each queue pushed to plainly (a pushing script writes its own)."""
    sets: dict[str, list[Any]] = {}
    backs: dict[str, list[bytes]] = {}
    fronts: dict[str, list[bytes]] = {}
    queues: dict[str, None] = {item.queue: None for item in formed}
    scripted: list[Command] = []
    for op in ops:
        if type(op) is Extra:
            continue  # sent before, by write()
        if type(op) is Enqueue and op.via is not None:
            scripted.append(op.via)
            queues[op.queue] = None
        elif type(op) is Enqueue:
            (fronts if op.front else backs).setdefault(op.queue, []).append(op.raw)
            queues[op.queue] = None
        else:
            queue = _queue_of(op)
            sets.setdefault(_SETS[op.into](queue), []).extend((op.at, op.raw))
            queues[queue] = None
    out: list[Command] = [item.command for item in formed]
    out += [("ZADD", name, *members) for name, members in sets.items()]
    out += [("LPUSH", CLUSTER.queue(queue), *raws) for queue, raws in backs.items()]
    out += [("RPUSH", CLUSTER.queue(queue), *raws) for queue, raws in fronts.items()]
    out += scripted
    moment = monotonic() if now is None else now
    pid = os.getpid()
    due = [q for q in queues if moment - _registered.get((pid, identity, q), -QUEUE_SET_REFRESH) >= QUEUE_SET_REFRESH]
    if due:
        out.append(("SADD", CLUSTER.queues, *due))
    woken = {queue: len(raws) for queue, raws in backs.items()}
    for queue, raws in fronts.items():
        woken[queue] = woken.get(queue, 0) + len(raws)
    for queue, count in woken.items():
        key = CLUSTER.wake(queue)
        out += [("LPUSH", key, *("1",) * min(count, keys.WAKE_TOKENS_MAX)),
                ("LTRIM", key, 0, keys.WAKE_TOKENS_MAX - 1), ("EXPIRE", key, keys.WAKE_TTL)]
    return out, due


def write(config: Config, redis: Any, ops: list[Operation]) -> list[Any]:
    """Write ``ops`` on the cluster ``redis`` in one pipeline (one round trip per primary
    concerned), or raise: the first error reply, or a :class:`RedisClusterError` before
    anything is sent for an operation not supported on a cluster yet."""
    refused = refusal(ops, config.redis_url)
    if refused is not None:
        raise refused
    identity = config.redis_target.identity
    first: list[Command] = []
    plain: list[Operation] = []
    formed: list[Formed] = []
    afterwards: list[tuple[AfterSplit, Operation, int, int]] = []  # (after, op, its replies' span)
    for op in ops:
        if type(op) is Extra:
            first.append(op.command)
        elif _formed(op):
            formed.append(_forms[op.via[1]](op))  # type: ignore[index]
        elif op.via is not None and not _in_queue_slot(op):
            start = len(first)
            first += _splits[op.via[1]](op)
            after = _after_splits.get(op.via[1])
            if after is not None:
                afterwards.append((after, op, start, len(first)))
            plain.append(replace(op, via=None))
        else:
            plain.append(op)
    # What is written beside the jobs first, answered, then the jobs (the module's docstring says why).
    replies = send(redis, first) if first else []
    split_replies = list(replies)
    out, registered = commands(plain, identity, formed=formed)
    written = send(redis, out)
    # What a form's script answered decides what it sends after (one slot each).
    after = [command for item, reply in zip(formed, written, strict=False) if item.after is not None
             for command in item.after(reply)]
    replies += written
    if after:
        replies += send(redis, after)
    for then, op, start, end in afterwards:
        then(redis, op, split_replies[start:end])
    moment = monotonic()
    pid = os.getpid()
    for queue in registered:
        _registered[(pid, identity, queue)] = moment
    return replies


def send(redis: Any, commands: list[Command]) -> list[Any]:
    """``commands`` in one cluster pipeline (one round trip per primary concerned); a
    script the node does not hold yet (``NOSCRIPT``: scripts are per node) is sent again
    with its text. Raises the first error reply."""
    pipe = redis.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    replies = pipe.execute(raise_on_error=False)
    again = [i for i, reply in enumerate(replies) if isinstance(reply, redis_lib.exceptions.NoScriptError)
             and str(commands[i][0]).upper() == "EVALSHA" and source_for_sha(commands[i][1]) is not None]
    if again:
        pipe = redis.pipeline(transaction=False)
        for i in again:
            pipe.execute_command("EVAL", source_for_sha(commands[i][1]), *commands[i][2:])
        for i, reply in zip(again, pipe.execute(raise_on_error=False), strict=True):
            replies[i] = reply
    for reply in replies:
        if isinstance(reply, (redis_lib.ResponseError, redis_lib.RedisError)):
            raise reply
    return list(replies)


def forget() -> None:
    """Forget which queues were registered (tests that flush the cluster)."""
    _registered.clear()
