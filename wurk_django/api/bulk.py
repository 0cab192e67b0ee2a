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
from ..redis.scripts import lua
from ..text import to_text
from ._base import RedisClient, conn
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
    r = conn(redis)
    token = secrets.token_hex(8)
    key = keys.bulk(token)
    pipe = r.pipeline(transaction=True)
    pipe.zcard(set_name)
    pipe.hset(key, mapping={"set": set_name, "action": action, "state": "queued", "queue": queue,
                            "taken": 0, "done": 0, "kept": 0, "refused": 0, "created_at": repr(time.time())})
    pipe.expire(key, PROGRESS_TTL)
    size = int(pipe.execute()[0])
    r.hset(key, "total", size)
    jid = Client(redis=redis).push({"class": SetAction, "queue": queue, "args": [token, set_name, action]})
    r.hset(key, "jid", jid or "")
    return token


def progress(token: str, redis: RedisClient | None = None) -> dict[str, Any] | None:
    """The progress of one bulk action as a dict (``None`` once forgotten): ``state``
    (queued, running, done, cancelled), ``total``, ``taken``, ``done``, ``kept``,
    ``refused``, ``reasons`` and the times."""
    raw = conn(redis).hgetall(keys.bulk(token))
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
    r = conn(redis)
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
        redis = context.redis()  # the Redis the job came from: the set's shard
        key = keys.bulk(token)
        info = redis.hgetall(key)
        if not info or to_text(info.get(b"state", b"")) in FINISHED:
            return  # forgotten (expired) or already finished: nothing to do
        hand, kept = keys.bulk_in_hand(token), keys.bulk_kept(token)
        budget = int(info.get(b"total") or 0)
        pipe = redis.pipeline(transaction=True)
        pipe.hset(key, "state", "running")
        pipe.hsetnx(key, "started_at", repr(time.time()))
        pipe.execute()
        work = _Chunk(redis, set_name, action, kept)
        try:
            while True:
                if self.interrupted():
                    raise JobInterrupted(f"bulk {action} on {set_name} stopped by shutdown; it resumes")
                if redis.hget(key, "cancel"):
                    _finish(redis, set_name, token, "cancelled")
                    return
                # Entries an earlier run took and did not settle come first.
                entries = redis.zrange(hand, 0, CHUNK - 1, withscores=True)
                if not entries:
                    left = budget - int(redis.hget(key, "taken") or 0)
                    if left <= 0:
                        break
                    flat = lua("bulk_take")(redis, [set_name, hand, key], [min(CHUNK, left)])
                    entries = [(flat[i], float(flat[i + 1])) for i in range(0, len(flat), 2)]
                    if not entries:
                        break  # the set emptied under us (someone else moved them)
                work.run(entries, hand, key)
        finally:
            work.close()
        _finish(redis, set_name, token, "done")


class _Chunk:
    """Settles taken entries one by one: each leaves the in-hand set only once it was
    pushed, killed or kept aside."""

    def __init__(self, redis: RedisClient, set_name: str, action: str, kept: str) -> None:
        self.redis = redis
        self.set_name = set_name
        self.action = action
        self.kept = kept
        self.client = Client(redis=redis)
        self.dead = DeadSet(redis=redis) if action == "kill" else None

    def run(self, entries: list[tuple[bytes, float]], hand: str, key: str) -> None:
        done = kept = 0
        reasons: list[str] = []
        for raw, score in entries:
            if self._settle(raw, reasons):
                self.redis.zrem(hand, raw)
                done += 1
            else:
                pipe = self.redis.pipeline(transaction=True)
                pipe.zadd(self.kept, {raw: score})
                pipe.zrem(hand, raw)
                pipe.execute()
                kept += 1
        pipe = self.redis.pipeline(transaction=True)
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


def _finish(redis: RedisClient, set_name: str, token: str, state: str) -> None:
    """Put the kept-aside entries back in the set (and, when cancelled, those still in
    hand), then mark the action finished."""
    for source in (keys.bulk_kept(token), keys.bulk_in_hand(token)):
        while True:
            entries = redis.zrange(source, 0, CHUNK - 1, withscores=True)
            if not entries:
                break
            pipe = redis.pipeline(transaction=True)
            pipe.zadd(set_name, dict(entries))
            pipe.zrem(source, *[member for member, _ in entries])
            pipe.execute()
    pipe = redis.pipeline(transaction=True)
    pipe.hset(keys.bulk(token), mapping={"state": state, "finished_at": repr(time.time())})
    pipe.expire(keys.bulk(token), PROGRESS_TTL)
    pipe.execute()
    logger.info("bulk %s on %s %s", to_text(redis.hget(keys.bulk(token), "action") or b""), set_name, state)
