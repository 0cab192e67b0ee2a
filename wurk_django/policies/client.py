"""The push side of debounce and throttle: a client middleware and a write hook.

The middleware decides at the push: a throttled push takes its slot or is dropped
(``None`` for the caller); a debounced push is given its run time, which makes it a
scheduled job. The write hook then writes that scheduled job with ``debounce.lua``
instead of a plain ``ZADD``, in the push's own round trip, so the pending job's
replacement and the schedule entry are one atomic step.

On a Redis Cluster (issue 46 item 3) the same script runs with every key in the slot
of the job's queue (:func:`cluster_form`, the cluster writer's form of the hook's
command): the debounce state, the queue's own schedule set and its index of pending
debounced jobs. Only a replaced tracked job's status record is elsewhere (a key of its
own): the script answers whether it removed the job the middleware named, and the
record is marked revoked in a second step after it (``mark_replaced.lua``). A crash
between the two leaves that record reading ``scheduled`` until it expires, as on one
server when another push came between the middleware's read and the script.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import replace
from typing import Any

from .. import context, keys, payload, testing
from ..client import cluster_writer
from ..client.operations import Command, Operation, Schedule
from ..redis.cluster_layout import CLUSTER, layout_of
from ..redis.scripts import lua
from ..results import store
from . import (
    DEBOUNCE,
    DEBOUNCED_AT,
    MAX_WAIT,
    MAX_WAIT_FACTOR,
    THROTTLE,
    UNIQUE,
    debounce_key,
    first_push,
    seconds,
    throttle_field,
    throttle_key,
)

logger = logging.getLogger("wurk_django.client.push")

DEBOUNCE_LUA = lua("policies/lua/debounce")
THROTTLE_LUA = lua("policies/lua/throttle")
MARK_REPLACED_LUA = lua("policies/lua/mark_replaced")
#: The jid of the tracked job each debounced push (by its own jid) replaces: read by the
#: middleware, which has the push's Redis, and taken by the write hook, which gives that job's
#: status record to ``debounce.lua`` in KEYS (the script marks it revoked). Entries of pushes
#: that failed before their write are dropped, oldest first, past :data:`REPLACING_MOST`.
_replacing: dict[str, str] = {}
_replacing_lock = threading.Lock()
REPLACING_MOST = 1024
#: How long a debounce key's state outlives the longest a burst can last, in seconds.
STATE_SLACK = 60


def _max_wait(job: dict, quiet: float) -> float:
    value = job.get(MAX_WAIT)
    return quiet * MAX_WAIT_FACTOR if value is None else seconds(MAX_WAIT, value)


class PolicyClientMiddleware:
    """Throttle: take the slot or drop the push. Debounce: give the job its run time."""

    @staticmethod
    def applies(job: dict) -> bool:
        return job.get(DEBOUNCE) is not None or job.get(THROTTLE) is not None

    def __call__(self, job_class: Any, job: dict, queue: str, redis: Any, call_next: Any) -> Any:
        if not first_push(job):
            return call_next()
        debounce, throttle = job.get(DEBOUNCE), job.get(THROTTLE)
        both = [name for name in (UNIQUE, DEBOUNCE, THROTTLE) if job.get(name) not in (None, False)]
        if len(both) > 1:
            raise ValueError(f"job {job['class']} has {' and '.join(both)}: one push policy at most "
                             "(unique, debounce or throttle)")
        config = context.config()
        if redis is None or testing.mode(config) in ("fake", "inline"):
            return call_next()  # nothing reaches Redis: no policy to keep
        # On a Redis Cluster (issue 46 item 3) ``redis`` is the process's RedisCluster: every
        # key is then named in the slot of the job's queue (its layout), the scripts the same.
        layout = layout_of(redis)
        if throttle is not None:
            return self._throttle(job, redis, layout, call_next)
        quiet = job[DEBOUNCE] = seconds(DEBOUNCE, debounce)
        job[MAX_WAIT] = _max_wait(job, quiet)
        if job.get("bid"):
            raise ValueError(f"job {job['class']} is debounced (debounce_for): it cannot join a batch, "
                             "whose count would wait for a job a later push replaces")
        if "at" in job:
            raise ValueError(f"job {job['class']} is debounced (debounce_for={quiet:g}s): it runs after its "
                             "quiet time, so perform_in/perform_at cannot choose a time")
        now = job[DEBOUNCED_AT] = time.time()
        job["at"] = now + quiet  # a scheduled job; the write hook writes it with debounce.lua
        _note_replaced(job["jid"], _pending_tracked_jid(redis, debounce_key(job, layout)))
        return call_next()

    @staticmethod
    def _throttle(job: dict, redis: Any, layout: Any, call_next: Any) -> Any:
        period = job[THROTTLE] = seconds(THROTTLE, job[THROTTLE])
        now = time.time()
        slot = int(now // period)
        key = throttle_key(job, slot, layout)
        lifetime = max(1, math.ceil((slot + 1) * period - now)) + 1
        taken, holder = THROTTLE_LUA(redis, [key, layout.throttle_drops(job["queue"])],
                                     [job["jid"], lifetime, throttle_field(job, period)])
        holder = holder.decode() if isinstance(holder, bytes) else holder
        if not taken and holder != job["jid"]:
            logger.info("throttled %s dropped (jid=%s; jid=%s took this %gs slot)", job["class"], job["jid"],
                        holder, period)
            return None
        try:
            result = call_next()
        except BaseException:
            redis.delete(key)  # the push did not happen: the slot is free again
            raise
        if not result:
            redis.delete(key)
        return result


def _pending_tracked_jid(redis: Any, state_key: str) -> str | None:
    """The jid of the job pending under ``state_key`` when it keeps a status record (its
    payload carries "track"); ``None`` otherwise. An untracked burst costs one ``HGET``."""
    member = redis.hget(state_key, "member")
    member = member.encode() if isinstance(member, str) else member
    if not member or b'"track"' not in member:
        return None
    try:
        pending = payload.loads(member)
    except ValueError:
        return None
    jid = pending.get("jid") if isinstance(pending, dict) else None
    return jid if isinstance(jid, str) and jid else None


def _note_replaced(jid: str, replaced: str | None) -> None:
    if replaced is None:
        return
    with _replacing_lock:
        while len(_replacing) >= REPLACING_MOST:
            del _replacing[next(iter(_replacing))]
        _replacing[jid] = replaced


def write_hook(ops: list[Operation]) -> list[Operation]:
    """Write each debounced job's first push with ``debounce.lua`` (one atomic step)."""
    for op in ops:
        # A quick look first (this runs on every push): a scheduled job with debounce_for at all.
        if type(op) is Schedule and op.job is not None and op.job.get(DEBOUNCE) is not None:
            break
    else:
        return ops
    out: list[Operation] = []
    for op in ops:
        job = op.job if type(op) is Schedule else None
        if (job is None or job.get(DEBOUNCE) is None or op.into != keys.SCHEDULE or op.via is not None
                or job.get(DEBOUNCED_AT) is None or "enqueued_at" in job or "overrated" in job):
            out.append(op)
            continue
        quiet = float(job[DEBOUNCE])
        max_wait = float(job.get(MAX_WAIT) or quiet * MAX_WAIT_FACTOR)
        now = float(job[DEBOUNCED_AT])
        lifetime = math.ceil(max_wait + quiet) + STATE_SLACK
        with _replacing_lock:
            replaced = _replacing.pop(job["jid"], None)
        record = [store.key(replaced)] if replaced is not None else []
        out.append(replace(op, via=DEBOUNCE_LUA.command([debounce_key(job), keys.SCHEDULE, keys.DEBOUNCES, *record],
                                                          [op.raw, repr(now), repr(quiet), repr(max_wait),
                                                           lifetime, job["jid"], replaced or ""])))
    return out


def cluster_form(op: Operation) -> cluster_writer.Formed:
    """The cluster writer's form of a debounced push (issue 46 item 3): ``debounce.lua`` with the
    keys of the job's queue's slot (the state, the queue's schedule set and index), without the
    replaced job's record, which :func:`_after_cluster_debounce` marks once the script answered."""
    via = op.via or ()
    count = int(via[2])
    state, args = str(via[3]), list(via[3 + count:])
    queue = (op.job or {})["queue"]
    digest = state.removeprefix(keys.DEBOUNCE_PREFIX)
    command = DEBOUNCE_LUA.command([CLUSTER.debounce_state(queue, digest), CLUSTER.schedule(queue),
                                    CLUSTER.debounces(queue)], args)
    replaced = str(args[6])
    if not replaced:
        return cluster_writer.Formed(command, queue)
    now, by = args[1], str(args[5])

    def after(reply: Any) -> list[Command]:
        # debounce.lua's third answer: the job it removed is the tracked one named in ARGV[7].
        named = isinstance(reply, (list, tuple)) and len(reply) > 2 and int(reply[2]) == 1
        return [MARK_REPLACED_LUA.command([store.key(replaced)], [now, by])] if named else []

    return cluster_writer.Formed(command, queue, after)


def install_cluster() -> None:
    """Let the cluster writer take debounced pushes (the write hook's ``via`` of ``debounce.lua``)."""
    cluster_writer.register_form(DEBOUNCE_LUA.sha, cluster_form)
