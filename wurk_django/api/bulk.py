"""Actions over a whole job set, run as a job of our own (issue 28 item 6).

"Retry all", "Kill all" and "Enqueue all" on a set of 100 000 entries take tens of
seconds: too long for one HTTP request, where a proxy's timeout would cut the work
short. :func:`start` records the action in a progress hash and pushes one
:class:`SetAction` job; a worker works through the set in chunks and counts what it
did in the hash, which the dashboard shows (:func:`progress`).

Each chunk leaves the set in one atomic step for the action's in-hand set
(``lua/bulk_take.lua``), so an entry is always in Redis: a worker that dies
mid-chunk leaves the rest of the chunk there, and the job's next run (its retry, or
the reaper's recovery) settles it first. At worst one entry is pushed twice; none is
lost. Entries that cannot be moved (unreadable, or a unique job whose lock another
job holds) wait in a kept-aside set and go back to the set at the end, so they are
not taken again and again in place of the rest.

On a Redis Cluster (issue 46 item 3) "the set" is every known queue's own set
(schedule, retry or dead: :mod:`wurk_django.redis.cluster_layout`). :func:`start`
records each queue's size in the progress hash (``budgets``), and the job works
through the queues one after the other, each with its own in-hand and kept-aside sets
and its ``taken`` count in that queue's slot (:func:`_places`), so each chunk's take is
still one script in one slot; the progress hash (a key of its own) counts what was done
over all of them. On one server every key and step is as it was.
"""

from __future__ import annotations

import logging
import secrets
import time
from typing import Any

from .. import context, keys, payload
from ..client.push import Client
from ..errors import JobInterrupted
from ..job import Job
from ..redis.cluster_layout import known_queues, layout_of
from ..redis.scripts import lua
from ..text import to_text
from ._base import RedisClient, cluster_aware, one_slot
from .sorted import DeadSet, _job_dict, _prepare_repush, refusal

__all__ = ["ACTIONS", "SetAction", "cancel", "progress", "start"]

logger = logging.getLogger("wurk_django.admin")

#: What a bulk action does to each entry.
ACTIONS = ("retry", "add_to_queue", "kill")
#: Entries taken from the set per step; the progress hash is updated after each step.
CHUNK = 200
#: How long a finished action's progress stays readable (seconds).
PROGRESS_TTL = 7 * 24 * 3600
#: Reasons kept for pushes a middleware stopped (the dashboard shows them).
REASONS_KEPT = 5

FINISHED = ("done", "cancelled")


def start(set_name: str, action: str, *, queue: str | None = None, redis: RedisClient | None = None) -> str:
    """Record a bulk ``action`` over ``set_name`` and push the job that does it, on
    ``queue`` (default: the jobs' default queue, ``default`` unless
    ``DEFAULT_JOB_OPTIONS`` names another); returns the token naming its progress
    (:func:`progress`).

    The action covers as many entries as the set holds now: entries added while it
    runs (a retried job that fails again at once) wait for the next action.
    """
    if action not in ACTIONS:
        raise ValueError(f"unknown bulk action {action!r}; one of {', '.join(ACTIONS)}")
    if queue is None:
        queue = str(context.config().default_job_options.get("queue") or "default")
    r = cluster_aware(redis)
    token = secrets.token_hex(8)
    key = keys.bulk(token)
    fields = {"set": set_name, "action": action, "state": "queued", "queue": queue,
              "taken": 0, "done": 0, "kept": 0, "refused": 0, "created_at": repr(time.time())}
    if layout_of(r).cluster:
        budgets = _budgets(r, set_name)
        pipe = one_slot(r, key).pipeline(transaction=True)
        pipe.hset(key, mapping={**fields, "budgets": payload.dumps(budgets), "total": sum(budgets.values())})
        pipe.expire(key, PROGRESS_TTL)
        pipe.execute()
        client = Client()  # the cluster writer (an explicit client would be written to as one server)
    else:
        pipe = r.pipeline(transaction=True)
        pipe.zcard(set_name)
        pipe.hset(key, mapping=fields)
        pipe.expire(key, PROGRESS_TTL)
        size = int(pipe.execute()[0])
        r.hset(key, "total", size)
        client = Client(redis=redis)
    jid = client.push({"class": SetAction, "queue": queue, "args": [token, set_name, action]})
    r.hset(key, "jid", jid or "")
    return token


#: The layout method naming a queue's own set on a cluster, by the one-server set's name.
PER_QUEUE = {keys.SCHEDULE: "schedule", keys.RETRY: "retry", keys.DEAD: "dead"}


def _budgets(redis: RedisClient, set_name: str) -> dict[str, int]:
    """On a cluster: how many entries each known queue's own ``set_name`` set holds now (the
    queues whose set is empty left out), one pipeline."""
    if set_name not in PER_QUEUE:
        raise ValueError(f"a bulk action on a Redis Cluster works on {', '.join(PER_QUEUE)}, not {set_name!r}")
    name_of = getattr(layout_of(redis), PER_QUEUE[set_name])
    queues = known_queues(redis)
    pipe = redis.pipeline(transaction=False)
    for name in queues:
        pipe.zcard(name_of(name))
    sizes = pipe.execute() if queues else []
    return {name: int(size) for name, size in zip(queues, sizes, strict=True) if int(size)}


def _places(redis: RedisClient, set_name: str, token: str, info: dict) -> list[tuple[str, str, str, str, int]]:
    """Where an action works: ``(set, in hand, kept aside, taken count's hash, budget)`` per
    set. One server: the set, the action's own keys and its progress hash, the total. A
    cluster: per queue of ``budgets``, its own set and keys in that queue's slot."""
    if not layout_of(redis).cluster:
        return [(set_name, keys.bulk_in_hand(token), keys.bulk_kept(token), keys.bulk(token),
                 int(info.get(b"total") or 0))]
    layout = layout_of(redis)
    name_of = getattr(layout, PER_QUEUE[set_name])
    budgets = payload.loads(info.get(b"budgets") or b"{}")
    return [(name_of(queue), layout.bulk_in_hand(token, queue), layout.bulk_kept(token, queue),
             layout.bulk_taken(token, queue), int(budget)) for queue, budget in budgets.items()]


def progress(token: str, redis: RedisClient | None = None) -> dict[str, Any] | None:
    """The progress of one bulk action as a dict (``None`` once forgotten): ``state``
    (queued, running, done, cancelled), ``total``, ``taken``, ``done``, ``kept``,
    ``refused``, ``reasons`` and the times."""
    raw = cluster_aware(redis).hgetall(keys.bulk(token))
    if not raw:
        return None
    info: dict[str, Any] = {to_text(k): to_text(v) for k, v in raw.items()}
    for name in ("total", "taken", "done", "kept", "refused"):
        info[name] = int(info.get(name) or 0)
    info["reasons"] = payload.loads(info["reasons"]) if info.get("reasons") else []
    info["finished"] = info.get("state") in FINISHED
    info["percent"] = 100 if info["finished"] or not info["total"] else min(
        100, (info["done"] + info["kept"]) * 100 // info["total"])
    return info


def cancel(token: str, redis: RedisClient | None = None) -> bool:
    """Ask a running action to stop after its current chunk; False if it is unknown or over."""
    r = cluster_aware(redis)
    key = keys.bulk(token)
    state = r.hget(key, "state")
    if state is None or to_text(state) in FINISHED:
        return False
    r.hset(key, "cancel", 1)
    return True


class SetAction(Job):
    """The worker's side of a dashboard bulk action; pushed by :func:`start`."""

    retry = 10  # a Redis error mid-way: the retry resumes where the counts say

    def perform(self, token: str, set_name: str, action: str) -> None:
        # The Redis the job came from: the set's shard, or the cluster's RedisCluster.
        redis = context.layout_redis()
        key = keys.bulk(token)
        info = redis.hgetall(key)
        if not info or to_text(info.get(b"state", b"")) in FINISHED:
            return  # forgotten (expired) or already finished: nothing to do
        pipe = one_slot(redis, key).pipeline(transaction=True)
        pipe.hset(key, "state", "running")
        pipe.hsetnx(key, "started_at", repr(time.time()))
        pipe.execute()
        places = _places(redis, set_name, token, info)
        work = _Chunk(redis, set_name, action, "")
        try:
            for set_key, hand, kept, counter, budget in places:
                work.set_name, work.kept = set_key, kept
                while True:
                    if self.interrupted():
                        raise JobInterrupted(f"bulk {action} on {set_name} stopped by shutdown; it resumes")
                    if redis.hget(key, "cancel"):
                        _finish(redis, places, token, "cancelled")
                        return
                    # Entries an earlier run took and did not settle come first.
                    entries = redis.zrange(hand, 0, CHUNK - 1, withscores=True)
                    if not entries:
                        left = budget - int(redis.hget(counter, "taken") or 0)
                        if left <= 0:
                            break
                        flat = lua("bulk_take")(redis, [set_key, hand, counter], [min(CHUNK, left)])
                        entries = [(flat[i], float(flat[i + 1])) for i in range(0, len(flat), 2)]
                        if not entries:
                            break  # the set emptied under us (someone else moved them)
                        if counter != key:  # a cluster: the queue's count took them; the page's too
                            redis.expire(counter, PROGRESS_TTL)
                            redis.hincrby(key, "taken", len(entries))
                    work.run(entries, hand, key)
        finally:
            work.close()
        _finish(redis, places, token, "done")


class _Chunk:
    """Settles taken entries one by one: each leaves the in-hand set only once it was
    pushed, killed or kept aside."""

    def __init__(self, redis: RedisClient, set_name: str, action: str, kept: str) -> None:
        self.redis = redis
        self.set_name = set_name
        self.action = action
        self.kept = kept
        # On a cluster the default client: the cluster writer (an explicit one is written as one server).
        self.client = Client() if layout_of(redis).cluster else Client(redis=redis)
        self.dead = DeadSet(redis=redis) if action == "kill" else None

    def run(self, entries: list[tuple[bytes, float]], hand: str, key: str) -> None:
        done = kept = 0
        reasons: list[str] = []
        for raw, score in entries:
            if self._settle(raw, reasons):
                self.redis.zrem(hand, raw)
                done += 1
            else:
                pipe = one_slot(self.redis, hand).pipeline(transaction=True)  # kept and hand: one slot
                pipe.zadd(self.kept, {raw: score})
                pipe.zrem(hand, raw)
                pipe.execute()
                kept += 1
        pipe = one_slot(self.redis, key).pipeline(transaction=True)
        pipe.hincrby(key, "done", done)
        pipe.hincrby(key, "kept", kept)
        if reasons:
            pipe.hincrby(key, "refused", len(reasons))
            pipe.hget(key, "reasons")
        result = pipe.execute()
        if reasons:
            known = payload.loads(result[-1]) if result[-1] else []
            if len(known) < REASONS_KEPT:
                self.redis.hset(key, "reasons", payload.dumps((known + reasons)[:REASONS_KEPT]))

    def _settle(self, raw: bytes, reasons: list[str]) -> bool:
        if self.dead is not None:
            # A kill from the dashboard is a death like any other: handlers run.
            self.dead.kill(raw, notify_failure=True, trim=False)
            return True
        job = _job_dict(raw)
        if job is None:
            return False
        try:
            jid = self.client.push(_prepare_repush(job, manual_retry=self.action == "retry"))
        except ValueError:
            return False  # the client refuses it as invalid: keep it where a person can see it
        if jid is None:
            reasons.append(refusal(self.redis, job))
            return False
        return True

    def close(self) -> None:
        if self.dead is not None:
            self.dead.trim()


def _finish(redis: RedisClient, places: list[tuple[str, str, str, str, int]], token: str, state: str) -> None:
    """Put the kept-aside entries back in their set (and, when cancelled, those still in
    hand), then mark the action finished."""
    for set_name, hand, kept, counter, _budget in places:
        for source in (kept, hand):
            while True:
                entries = redis.zrange(source, 0, CHUNK - 1, withscores=True)
                if not entries:
                    break
                pipe = one_slot(redis, source).pipeline(transaction=True)  # the set's slot on a cluster
                pipe.zadd(set_name, dict(entries))
                pipe.zrem(source, *[member for member, _ in entries])
                pipe.execute()
        if counter != keys.bulk(token):
            redis.delete(counter)  # a cluster queue's taken count: done with
    key = keys.bulk(token)
    pipe = one_slot(redis, key).pipeline(transaction=True)
    pipe.hset(key, mapping={"state": state, "finished_at": repr(time.time())})
    pipe.expire(key, PROGRESS_TTL)
    pipe.execute()
    name = to_text(redis.hget(key, "set") or b"")
    logger.info("bulk %s on %s %s", to_text(redis.hget(key, "action") or b""), name, state)
