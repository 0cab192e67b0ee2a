"""Batches on a Redis Cluster (issue 46 item 3): the steps that span hash slots, in their order.

On one server a batch job is registered in its batch and pushed in one script
(``push.lua``), and an event is claimed and its callbacks pushed in one script
(``fire.lua``). On a cluster a batch's keys share the slot ``{b:<bid>}``
(:mod:`wurk_django.redis.cluster_layout`) and each queue has its own, so each of
those steps becomes two, in an order chosen so that a crash between them loses
nothing and counts nothing twice:

**A push: register, then push.** ``register.lua`` adds the jid to the batch (total
and pending +1, once per jid) in ``{b:<bid>}``, and only once that is answered is the
job pushed onto its queue (:func:`split`, through the cluster writer's split seam,
:func:`wurk_django.client.cluster_writer.register_split`). So a worker can never
acknowledge a job its batch does not count yet (the other order would let a fast
worker's ack find no member, and the late registration then count a job that already
ran: a batch that never finishes). A crash between the two leaves a registered job that
was never pushed: the batch does not finish, exactly as when the pushing process dies
inside a ``jobs()`` block on one server, since the block's hold (a pending sentinel,
released only after the block's last push) keeps it open there too. A resend counts
nothing twice: a jid already a member is not counted again.

**An event: register the callbacks in the parent, claim and push, then the batch's
bookkeeping.** The callbacks' jids are derived from ``(bid, event, position)``
(:func:`callback_jid`) instead of drawn at random, so every process racing through
the gate plans the same jobs:

1. a child's ``complete``/``success`` callbacks join its parent (``register.lua`` in
   ``{b:<parent>}``, only while the parent exists), *before* they can run, as any push;
2. ``claim_and_push.lua`` in the slot of the callback queue: ``SET NX`` of the marker
   ``{q:<queue>}:batch-fired:<bid>:<event>`` and the pushes, one step, so the callbacks
   are pushed once however many processes race, and never claimed without them;
3. the batch's hash records the event (``<event>`` = 1, ``<event>_at``,
   ``<event>_jids``) with ``HSETNX``, by whichever process passes, so a crash before
   it is made good by the next pass through the gate, and a late pass changes nothing.

A crash after 1 leaves the parent counting callbacks not pushed yet: the next pass
through the child's gate (a job's retry, the reaper's recovery of the job whose ack
ran the gate) registers the same jids again (counted once) and claims. A ``death``
marks the batch (``death`` = 1) and the fleet's index ``{wurk}:dead-batches`` first, as
``fire.lua`` does each time.

**Deleting a batch** (``Status.delete``, the admin's Delete button): one step per slot,
parent first, the batch's own keys last (:func:`wurk_django.batch.scripts.delete` says
why that order).

**A retry from the morgue** (a job back from the dead set, pushed again) makes its batch
live again as ``push.lua`` does: ``register.lua`` clears the batch's ``death`` flag when
its last dead job is back, and answers so; then the batch leaves the fleet's
``{wurk}:dead-batches`` index (another slot), in an order that never loses a death that
comes meanwhile (:func:`revived`).
"""

from __future__ import annotations

import hashlib
from typing import Any

from ..client import cluster_writer
from ..client.operations import Enqueue, Operation, wake_args
from ..redis.cluster_layout import CLUSTER
from . import scripts


def _register(bid: str, jids: list[str], revive: bool, must_exist: bool) -> tuple[list[str], list[Any]]:
    """``register.lua``'s KEYS (one slot, ``{b:<bid>}``) and ARGV for ``jids`` of ``bid``."""
    return ([CLUSTER.batch(bid), CLUSTER.batch(bid, "jids"), CLUSTER.batch(bid, "died")],
            [scripts.DEFAULT_EXPIRY, 1 if revive else 0, 1 if must_exist else 0, *jids])


def register_command(bid: str, jids: list[str], *, revive: bool) -> tuple[Any, ...]:
    """The ``EVALSHA`` registering ``jids`` in ``bid``, for a round trip of the cluster writer."""
    return scripts.REGISTER.command(*_register(bid, jids, revive, False))


def split(op: Operation) -> list[tuple[Any, ...]]:
    """The cluster writer's split of a batch job's push (``push.lua``/``schedule.lua`` on one
    server): its registration, sent and answered before the job's plain push."""
    job = op.job or {}
    # A job back from the dead set becomes live again (push.lua); a scheduled one is only counted.
    return [register_command(str(job["bid"]), [str(job["jid"])], revive=type(op) is Enqueue)]


#: ``register.lua``'s answer when a jid back from the dead set made its batch live again.
REVIVED = -2


def revived(client: Any, op: Operation, replies: list[Any]) -> None:
    """After a batch job's push: when its registration answered :data:`REVIVED` (a retry from
    the morgue brought the batch's last dead job back), take the batch out of the fleet's
    dead-batches index. The flag and the index are in two slots, and a death sets the flag
    first and adds to the index second (:func:`fire`); so the entry is removed, then the
    flag read again, and put back if a death came meanwhile: the index never misses a
    batch whose flag says it is dead."""
    if not any(reply == REVIVED for reply in replies):
        return
    bid = str((op.job or {})["bid"])
    score = client.zscore(CLUSTER.dead_batches, bid)
    if score is None:
        return
    client.zrem(CLUSTER.dead_batches, bid)
    if client.hget(CLUSTER.batch(bid), "death") == b"1":
        client.zadd(CLUSTER.dead_batches, {bid: score}, nx=True)  # a newer death's entry wins


def install() -> None:
    """Let the cluster writer take batch jobs (the write hook's ``via`` of PUSH and SCHEDULE)."""
    cluster_writer.register_split(scripts.PUSH.sha, split, revived)
    cluster_writer.register_split(scripts.SCHEDULE.sha, split)


def callback_jid(bid: str, event: str, position: int) -> str:
    """The jid of ``event``'s callback number ``position`` of ``bid``: the same in every
    process (24 hex digits, a jid's shape), so racing processes plan the same jobs."""
    return hashlib.sha256(f"{bid}|{event}|{position}".encode()).hexdigest()[:24]


def fire(client: Any, bid: str, event: str, *, now: float, queue: str, parent: str | None,
         callbacks: list[tuple[str, bytes]]) -> int:
    """Fire ``event`` of ``bid`` on the cluster ``client`` in the module docstring's order
    (``callbacks``: ``(jid, payload)``, jids from :func:`callback_jid`); 1 when this call
    claimed it, 0 when it was claimed already. A parent that is gone is not written to,
    and the event fires all the same, as ``fire.lua`` does."""
    if event == "death":
        # The flag first, answered, then the index: a cluster pipeline does not keep the order
        # of commands to different nodes, and revived() relies on this one.
        client.hset(CLUSTER.batch(bid), mapping={"death": "1", "death_at": repr(now)})
        pipe = client.pipeline(transaction=False)
        pipe.zadd(CLUSTER.dead_batches, {bid: now})
        pipe.zremrangebyscore(CLUSTER.dead_batches, "-inf", f"({now - scripts.DEFAULT_EXPIRY!r}")
        pipe.zremrangebyrank(CLUSTER.dead_batches, 0, -scripts.INDEX_MAX)
        pipe.execute()
    jids = [jid for jid, _ in callbacks]
    if parent and jids:
        # Step 1: before the callbacks exist, as any batch job's push (None: the parent is gone).
        scripts.REGISTER(client, *_register(parent, jids, False, True))
    # Step 2: claim and push, one step in the callback queue's slot.
    fired = int(scripts.CLAIM_AND_PUSH(
        client, [CLUSTER.batch_fired(queue, bid, event), CLUSTER.queue(queue), CLUSTER.wake(queue)],
        [scripts.CALLBACK_MARKER_TTL, *wake_args(), *(raw for _, raw in callbacks)]))
    if fired == 1 and callbacks:
        client.sadd(CLUSTER.queues, queue)  # the queue set, as the cluster writer tells it
    # Step 3: the batch's own record of the event; HSETNX, so any pass makes good a crash.
    key = CLUSTER.batch(bid)
    pipe = client.pipeline(transaction=False)
    if event != "death":
        pipe.hsetnx(key, event, "1")
        pipe.hsetnx(key, f"{event}_at", repr(now))
    if jids:
        pipe.hsetnx(key, f"{event}_jids", ",".join(jids))
    pipe.expire(key, scripts.DEFAULT_EXPIRY, nx=True)
    pipe.execute()
    return fired


def fired(client: Any, bid: str, event: str, queue: str) -> bool:
    """Whether ``event`` of ``bid`` was claimed (its marker, in the callback queue's slot)."""
    return bool(client.exists(CLUSTER.batch_fired(queue, bid, event)))


