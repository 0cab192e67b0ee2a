"""The fire gate: deciding, from a batch's counts, which events fire (PRO-240..247).

Every script that takes a member out of a batch (a success, a death, a hold
released, a job removed, a child drained) returns the batch's state read in
the same atomic step: ``pending``, ``live`` (members not yet succeeded or
dead) and ``kids`` (children not yet drained). The gate turns that into:

* ``complete`` once nothing is live and no child is pending;
* ``success`` at the same moment if, in addition, every job succeeded
  (``pending == 0``) and neither the batch nor a direct child has died;
* then the parent is told this child drained, and its own gate runs.

Each event is claimed and its callback jobs pushed in one script
(``fire.lua``), so however many processes race through the gate with the same
state, the callbacks are enqueued once. ``complete``/``success`` callbacks of
a child join the parent batch, so the parent cannot finish before they ran.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from .. import context as job_context
from .. import payload, signals, testing
from ..client.planning import Planned
from ..client.push import Client
from ..client.writer import Writer
from ..conf import Config
from ..redis.cluster_layout import layout_of
from ..redis.errors import ride_out
from . import cluster as batch_cluster
from . import context, scripts

logger = logging.getLogger("wurk_django.batch")

#: The wire name of the job that runs one callback (the Ruby side registers the same).
CALLBACK_CLASS = "Wurk::Batch::CallbackJob"


class CallbackEnqueueError(RuntimeError):
    """A batch event's callbacks could not be enqueued; the event stays unfired so a
    later pass through the gate fires it again."""


def gate_reporting(bid: str, pending: int, live: int, kids: int, config: Config | None = None) -> None:
    """:func:`maybe_fire`, riding out a failover or a short outage (firing is claimed in one
    script, so it is safe to repeat); a failure is logged, never raised (the jobs already ran)."""
    config = config or job_context.config()
    try:
        ride_out(lambda: maybe_fire(bid, pending, live, kids, config), f"batch {bid}: running its callbacks")
    except Exception:
        logger.exception("batch %s: could not run its callbacks; the next job or retry of it will try again", bid)


def maybe_fire(bid: str, pending: int, live: int, kids: int, config: Config | None = None) -> None:
    """Fire whatever the state ``(pending, live, kids)`` of ``bid`` calls for."""
    if live != 0 or kids != 0:
        return  # still running, or gone (-1): a straggler never fires a deleted batch
    config = config or job_context.config()
    if testing.mode(config) == "fake":
        return  # fake mode records jobs without running them: nothing ever finishes
    fields = _fields(bid, config)
    if fields is None:
        return
    fire_event(bid, "complete", fields, config)
    if pending == 0 and not _subtree_dead(bid, config):
        fire_event(bid, "success", fields, config)
    propagate_to_parent(bid, fields, config)


def _fields(bid: str, config: Config) -> dict[str, str] | None:
    redis = job_context.layout_redis(config=config)
    values = redis.hmget(layout_of(redis).batch(bid), "callbacks", "callback_queue", "parent_bid", "linger",
                         "created_at")
    if all(v is None for v in values):
        return None
    names = ("callbacks", "callback_queue", "parent_bid", "linger", "created_at")
    return {name: (v.decode() if v else "") for name, v in zip(names, values, strict=True)}


def _subtree_dead(bid: str, config: Config) -> bool:
    """The batch or one of its direct children carries the death flag (it cascades upward,
    so direct children are enough)."""
    redis = job_context.layout_redis(config=config)
    layout = layout_of(redis)
    kids = [k.decode() for k in redis.smembers(layout.batch(bid, "kids"))]
    pipe = redis.pipeline(transaction=False)
    for b in [bid, *kids]:
        pipe.hget(layout.batch(b), "death")
    return any(flag == b"1" for flag in pipe.execute())


def callback_entries(text: str, event: str) -> list[tuple[str, dict]]:
    """``(target, options)`` of the entries registered for ``event``; bad entries are skipped."""
    if not text:
        return []
    try:
        entries = payload.loads(text)
    except Exception:
        logger.error("unreadable callbacks field: %r", text[:200])
        return []
    found = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, list) and len(entry) >= 2 and entry[0] == event and isinstance(entry[1], str):
            options = entry[2] if len(entry) > 2 and isinstance(entry[2], dict) else {}
            found.append((entry[1], options))
    return found


def callback_job(bid: str, target: str, event: str, options: dict, queue: str, parent: str | None,
                 wire: payload.WireFormat = payload.SIDEKIQ8) -> dict:
    """The item of one callback's push (before the push door plans it)."""
    job = {"class": CALLBACK_CLASS, "args": [bid, target, event, options], "queue": queue, "retry": True,
           "jid": payload.new_jid()}
    if parent and event != "death":
        job["bid"] = parent  # the parent waits for its child's callbacks
    return job


def plan_callbacks(client: Client, items: list[dict]) -> list[Planned]:
    """The callbacks through the push door (validation, client middleware, argument
    check), so ``fire.lua`` only moves bytes that were planned. Planned outside any open
    ``jobs()`` block: no other bid is stamped on them, no buffer keeps them. A callback a
    middleware stopped is left out; all of them go to the batch's callback queue (the
    script pushes onto that one list). They are planned before the claim (the claim and
    the push are one atomic step), so a process that loses the race planned callbacks it
    never pushes: a middleware with side effects sees that plan."""
    tokens = context.set_batch(None, None)
    try:
        planned = [client.plan(item) for item in items]
    finally:
        context.restore(tokens)
    return [p for p in planned if p is not None]


def fire_event(bid: str, event: str, fields: dict[str, str] | None = None, config: Config | None = None) -> bool:
    """Claim ``event`` for ``bid`` and enqueue its callbacks; True if this call fired it."""
    config = config or job_context.config()
    fields = fields if fields is not None else _fields(bid, config)
    if fields is None:
        return False
    queue = fields["callback_queue"] or "default"
    parent = fields["parent_bid"] or None
    # The batch's own server, whatever the callbacks' queue would route to: the script
    # pushes them where the batch lives.
    redis = job_context.layout_redis(config=config)
    clustered = layout_of(redis).cluster
    client = Client(redis=redis, config=config)
    items = [callback_job(bid, target, event, options, queue, parent, config.wire_format)
             for target, options in callback_entries(fields["callbacks"], event)]
    if clustered:
        # Racing processes must plan the same callbacks: they join the parent before the claim.
        for position, item in enumerate(items):
            item["jid"] = batch_cluster.callback_jid(bid, event, position)
    planned = plan_callbacks(client, items)
    # In the testing modes the planned callbacks are written by the client after the claim,
    # so they are recorded (fake) or run at once (inline) like every other job.
    through_client = testing.mode(config) is not None
    now = config.wire_format.now()
    wired = [] if through_client else [(p.jid, p.raw(enqueued_at=now)) for p in planned]
    try:
        if clustered:
            # Issue 46 item 3: the claim and the push in the callback queue's slot, the joins
            # and the bookkeeping in the batches' own (batch/cluster.py says in which order).
            fired = batch_cluster.fire(redis, bid, event, now=time.time(), queue=queue,
                                       parent=parent if event != "death" else None, callbacks=wired)
        else:
            command = scripts.fire_command(bid, event, now=time.time(), queue=queue,
                                           parent=parent if event != "death" else None, callbacks=wired)
            fired = int(Writer(config).send([command])[0])
    except Exception as exc:
        raise CallbackEnqueueError(f"batch {bid}: could not fire {event!r}: {exc}") from exc
    if fired != 1:
        return False
    logger.info("batch %s: %s (%d callback%s)", bid, event, len(planned), "" if len(planned) == 1 else "s")
    if through_client:
        tokens = context.set_batch(None, None)
        try:
            for p in planned:
                client.write(p)
        finally:
            context.restore(tokens)
    if event == "success":
        _apply_linger(bid, fields, config)
        if signals.batch_succeeded.receivers:
            created = _created_at(fields)
            signals.send(signals.batch_succeeded, "batch", bid=bid,
                         duration=max(time.time() - created, 0.0) if created else 0.0)
    elif event == "death" and parent:
        fire_event(parent, "death", None, config)  # every ancestor dies once with it
    return True


def _created_at(fields: dict[str, str] | None) -> float | None:
    try:
        return float((fields or {}).get("created_at") or 0) or None
    except (TypeError, ValueError):
        return None


def fire_death(bid: str, config: Config | None = None) -> bool:
    return fire_event(bid, "death", None, config)


def _apply_linger(bid: str, fields: dict[str, str], config: Config) -> None:
    """After success the batch is kept only ``linger`` seconds (24 hours by default)."""
    try:
        linger = int(float(fields["linger"])) if fields["linger"] else scripts.POST_SUCCESS_EXPIRY
    except ValueError:
        linger = scripts.POST_SUCCESS_EXPIRY
    redis = job_context.layout_redis(config=config)
    pipe = redis.pipeline(transaction=False)
    for key in layout_of(redis).batch_keys(bid):
        pipe.expire(key, max(linger, 1))
    pipe.execute()


def propagate_to_parent(bid: str, fields: dict[str, str] | None = None, config: Config | None = None) -> None:
    """This batch drained: tell its parent, and run the parent's gate with its new state."""
    config = config or job_context.config()
    fields = fields if fields is not None else _fields(bid, config)
    parent = fields and fields["parent_bid"]
    if not parent:
        return
    redis = job_context.layout_redis(config=config)
    _clear_cascaded_death(redis, parent)
    pending, live, kids = scripts.kid_done(redis, parent, bid)
    maybe_fire(parent, pending, live, kids, config)


def _clear_cascaded_death(redis: Any, parent: str) -> None:
    """A parent flagged dead only because a child died is no longer dead once no child is
    (a retry from the morgue worked): success can then fire for it too."""
    layout = layout_of(redis)
    if redis.hget(layout.batch(parent), "death") != b"1" or redis.scard(layout.batch(parent, "died")):
        return
    kids = [k.decode() for k in redis.smembers(layout.batch(parent, "kids"))]
    pipe = redis.pipeline(transaction=False)
    for kid in kids:
        pipe.hget(layout.batch(kid), "death")
    if any(flag == b"1" for flag in pipe.execute()):
        return
    redis.hdel(layout.batch(parent), "death")
    redis.zrem(layout.dead_batches, parent)
