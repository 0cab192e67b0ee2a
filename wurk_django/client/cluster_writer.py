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
its key, ``MOVED``/``ASK`` followed. A push that needs more than the job (a feature's
script, a batch's or a status record's companion commands) is refused before anything
is sent, with :class:`~wurk_django.errors.RedisClusterError` naming it: those features
are not converted yet.
"""

from __future__ import annotations

import os
from time import monotonic
from typing import Any

import redis as redis_lib

from .. import keys, payload
from ..conf import Config
from ..errors import RedisClusterError
from ..redis import cluster
from ..redis.cluster_layout import CLUSTER, QUEUE_SET_REFRESH
from .operations import Command, Enqueue, Extra, Operation, Schedule

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
            name = str(op.command[0]).upper()
            return cluster.not_yet(f"A push with companion commands ({name}: batches, status tracking, "
                                   f"and other features writing beside the job)", url)
        if op.via is not None:
            return cluster.not_yet(f"A push through a feature's script ({str(op.via[0]).upper()}: unique jobs, "
                                   f"batches, limiters)", url)
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


def commands(ops: list[Operation], identity: str, *, now: float | None = None) -> tuple[list[Command], list[str]]:
    """The commands of one round trip for ``ops`` (checked by :func:`refusal`) in the cluster
    layout, and the queues whose registration in the queue set they include: the pushes
    (``ZADD`` per set, ``LPUSH``/``RPUSH`` per queue), the ``SADD`` of queues this process has
    not registered lately, then the wake-up tokens of each queue pushed to."""
    sets: dict[str, list[Any]] = {}
    backs: dict[str, list[bytes]] = {}
    fronts: dict[str, list[bytes]] = {}
    queues: dict[str, None] = {}
    for op in ops:
        if type(op) is Enqueue:
            (fronts if op.front else backs).setdefault(op.queue, []).append(op.raw)
            queues[op.queue] = None
        else:
            queue = _queue_of(op)
            sets.setdefault(_SETS[op.into](queue), []).extend((op.at, op.raw))
            queues[queue] = None
    out: list[Command] = [("ZADD", name, *members) for name, members in sets.items()]
    out += [("LPUSH", CLUSTER.queue(queue), *raws) for queue, raws in backs.items()]
    out += [("RPUSH", CLUSTER.queue(queue), *raws) for queue, raws in fronts.items()]
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
    out, registered = commands(ops, identity)
    pipe = redis.pipeline(transaction=False)
    for command in out:
        pipe.execute_command(*command)
    replies = pipe.execute(raise_on_error=False)
    for reply in replies:
        if isinstance(reply, redis_lib.ResponseError):
            raise reply
    moment = monotonic()
    pid = os.getpid()
    for queue in registered:
        _registered[(pid, identity, queue)] = moment
    return replies


class MiddlewareRedis:
    """What client middleware is handed as its ``redis`` on a Redis Cluster (issue 46 stage 2):
    the built-in middleware that use Redis (unique locks, throttles) keep single-server key
    names and multi-key scripts, not converted yet, so any use of it raises
    :class:`~wurk_django.errors.RedisClusterError` naming what was asked, before the push
    writes anything, instead of a raw ``CROSSSLOT`` or a lock in the wrong layout."""

    def __init__(self, url: str) -> None:
        self._url = url

    def __getattr__(self, name: str) -> Any:
        raise cluster.not_yet(f"Client middleware using Redis (unique jobs, throttles, your own: it asked "
                              f"for {name!r})", self._url)

    def __bool__(self) -> bool:
        return True


def forget() -> None:
    """Forget which queues were registered (tests that flush the cluster)."""
    _registered.clear()
