"""The batch Lua scripts, and the commands that run them (PRO-270..280).

Each function builds the ``KEYS``/``ARGV`` of one script from a bid, so the key
layout is spelled out in one place: Sidekiq Pro's (:mod:`wurk_django.keys`) on one
server, the cluster layout's ``{b:<bid>}`` keys when the client is a ``RedisCluster``
(issue 46 item 3: every key of these scripts is the batch's own, one slot; the steps
that span slots are :mod:`.cluster`'s).
``*_command`` functions return an ``EVALSHA`` tuple to send inside a larger
round trip (a ``NOSCRIPT`` reply is resent as ``EVAL`` by the writer); the
others run the script now.
"""

from __future__ import annotations

from typing import Any

from .. import keys
from ..client.operations import wake_args
from ..redis.cluster_layout import CLUSTER, SIDEKIQ, SidekiqLayout, layout_of
from ..redis.scripts import lua

#: How long any batch key lives unless the batch says otherwise (30 days).
DEFAULT_EXPIRY = 30 * 24 * 3600
#: How long a batch stays readable after ``success`` fired (per-batch ``linger`` overrides).
POST_SUCCESS_EXPIRY = 24 * 3600
#: How long a callback marker ("this event's callbacks were enqueued") is kept.
CALLBACK_MARKER_TTL = 30 * 24 * 3600
#: Most members kept in the ``batches`` / ``dead-batches`` indexes.
INDEX_MAX = 1_000_000
#: Most callback entries one batch may hold.
CALLBACKS_MAX = 1000

PUSH = lua("batch/lua/push")
SCHEDULE = lua("batch/lua/schedule")
HOLD = lua("batch/lua/hold")
ACK_SUCCESS = lua("batch/lua/ack_success")
ACK_FAILED = lua("batch/lua/ack_failed")
ACK_COMPLETE = lua("batch/lua/ack_complete")
KID_DONE = lua("batch/lua/kid_done")
INVALIDATE = lua("batch/lua/invalidate")
APPEND_CALLBACK = lua("batch/lua/append_callback")
REMOVE_JOBS = lua("batch/lua/remove_jobs")
DELETE = lua("batch/lua/delete")
LEAVE_PARENT = lua("batch/lua/cluster_leave_parent")
FIRE = lua("batch/lua/fire")
#: A Redis Cluster's halves of PUSH/SCHEDULE and FIRE (:mod:`.cluster`).
REGISTER = lua("batch/lua/register")
CLAIM_AND_PUSH = lua("batch/lua/claim_and_push")


def push_command(bid: str, queue: str, jid: str, raw: bytes, front: bool = False) -> tuple[Any, ...]:
    """Register ``jid`` in ``bid`` and push ``raw`` onto ``queue`` (waking idle fetchers)."""
    return PUSH.command(
        [keys.batch(bid), keys.batch(bid, "jids"), keys.queue(queue), keys.QUEUES, keys.batch(bid, "died"),
         keys.DEAD_BATCHES, keys.wake(queue)],
        [queue, jid, raw, bid, DEFAULT_EXPIRY, 1 if front else 0, *wake_args()],
    )


def schedule_command(bid: str, score: float, jid: str, raw: bytes) -> tuple[Any, ...]:
    return SCHEDULE.command([keys.SCHEDULE, keys.batch(bid), keys.batch(bid, "jids")],
                            [repr(float(score)), raw, jid, DEFAULT_EXPIRY])


def hold_command(bid: str, sentinel: str, expiry: int, layout: SidekiqLayout = SIDEKIQ) -> tuple[Any, ...]:
    return HOLD.command([layout.batch(bid), layout.batch(bid, "jids")], [sentinel, expiry])


def ack_success(client: Any, bid: str, jid: str) -> list[int]:
    """``[removed, pending, live, pending kids]``."""
    layout = layout_of(client)
    return [int(x) for x in ACK_SUCCESS(client, [layout.batch(bid), layout.batch(bid, "jids"),
                                                  layout.batch(bid, "failed"), layout.batch(bid, "pkids")], [jid])]


def ack_failed(client: Any, bid: str, jid: str) -> int:
    layout = layout_of(client)
    return int(ACK_FAILED(client, [layout.batch(bid), layout.batch(bid, "failed")], [jid, DEFAULT_EXPIRY]))


def ack_complete(client: Any, bid: str, jid: str) -> list[int]:
    """``[live, died, first death, pending kids, pending]``."""
    layout = layout_of(client)
    return [int(x) for x in ACK_COMPLETE(
        client, [layout.batch(bid), layout.batch(bid, "jids"), layout.batch(bid, "died"), layout.batch(bid, "failed"),
                 layout.batch(bid, "pkids")], [jid, DEFAULT_EXPIRY])]


def kid_done(client: Any, parent: str, child: str) -> list[int]:
    """The parent's ``[pending, live, pending kids]`` after ``child`` left its pending kids."""
    layout = layout_of(client)
    return [int(x) for x in KID_DONE(client, [layout.batch(parent), layout.batch(parent, "jids"),
                                              layout.batch(parent, "pkids")], [child])]


def invalidate(client: Any, bid: str) -> int:
    layout = layout_of(client)
    return int(INVALIDATE(client, [layout.batch(bid)], []))


def append_callback(client: Any, bid: str, entry: str, event: str) -> Any:
    layout = layout_of(client)
    return APPEND_CALLBACK(client, [layout.batch(bid)], [entry, event, CALLBACKS_MAX])


def remove_jobs(client: Any, bid: str, jids: list[str]) -> list[int]:
    """``[removed, pending, live, pending kids]``."""
    layout = layout_of(client)
    return [int(x) for x in REMOVE_JOBS(client, [layout.batch(bid), layout.batch(bid, "jids"),
                                                 layout.batch(bid, "failed"), layout.batch(bid, "pkids")], jids)]


def delete(client: Any, bid: str, parent: str | None, tags: list[str]) -> list[int]:
    """Delete the batch; the parent's ``[pending, live, pending kids]`` (``[0, -1, -1]`` without one)."""
    if layout_of(client).cluster:
        return _delete_on_cluster(client, bid, parent, tags)
    own = keys.batch_keys(bid)
    batch_keys = [*own, keys.BATCHES, keys.DEAD_BATCHES]
    if parent:
        batch_keys += [keys.batch(parent), keys.batch(parent, "jids"), keys.batch(parent, "pkids"),
                       keys.batch(parent, "kids")]
    batch_keys += [keys.batch_tag(t) for t in tags]
    return [int(x) for x in DELETE(client, batch_keys, [bid, len(own), 1 if parent else 0])]


def _delete_on_cluster(client: Any, bid: str, parent: str | None, tags: list[str]) -> list[int]:
    """:func:`delete` on a Redis Cluster (issue 46 item 3). One script spans the batch's
    keys, the fleet's indexes, its parent's and its tags' on one server: several slots
    here, so one step per slot, each atomic, in an order that leaves nothing pointing at
    a missing batch for long: the parent first (its gate then sees the batch gone), then
    the tags and the indexes (``{wurk}``), then the batch's own keys (``{b:<bid>}``, one
    ``UNLINK``). A step that fails leaves the rest for a second ``delete()``, which
    repeats each step harmlessly."""
    state = [0, -1, -1]
    if parent:
        state = [int(x) for x in LEAVE_PARENT(client, [CLUSTER.batch(parent), CLUSTER.batch(parent, "jids"),
                                                       CLUSTER.batch(parent, "pkids"),
                                                       CLUSTER.batch(parent, "kids")], [bid])]
    pipe = client.pipeline(transaction=False)
    for tag in tags:
        pipe.srem(CLUSTER.batch_tag(tag), bid)
    pipe.zrem(CLUSTER.batches, bid)
    pipe.zrem(CLUSTER.dead_batches, bid)
    pipe.execute()
    client.unlink(*CLUSTER.batch_keys(bid))
    return state


def fire_command(bid: str, event: str, *, now: float, queue: str, parent: str | None,
                 callbacks: list[tuple[str, bytes]]) -> tuple[Any, ...]:
    """Claim ``event`` and push its callback jobs (``(jid, payload)``) in one step, waking
    idle fetchers of ``queue`` as any push does; the reply is 1 (fired now), 0 (fired
    already) or -1 (the batch is gone)."""
    fire_keys = [keys.batch(bid), keys.batch(bid, event), keys.DEAD_BATCHES, keys.QUEUES, keys.queue(queue),
                 keys.wake(queue)]
    if parent:
        fire_keys += [keys.batch(parent), keys.batch(parent, "jids")]
    args: list[Any] = [event, bid, repr(now), CALLBACK_MARKER_TTL, DEFAULT_EXPIRY, repr(now - DEFAULT_EXPIRY),
                       INDEX_MAX, queue, 1 if parent else 0, *wake_args()]
    for jid, raw in callbacks:
        args += [jid, raw]
    return FIRE.command(fire_keys, args)
