"""What a push loses when a Ruby process serves its queue (issue 43 item 9).

In a fleet shared with Ruby Sidekiq, a queue may be served by Ruby processes too,
and a Ruby worker runs what it fetches as Sidekiq does: it passes ``args`` only (a
job's top-level ``kwargs`` is dropped) and knows nothing of our result records
(``status:<jid>``, written for Celery-style tasks and ``django.tasks``), which
then stay PENDING. A push of such a job to such a queue is warned about, once per
queue and kind of loss in each process, naming the Ruby process.

Who is Ruby is read from the process set: every process's heartbeat ``info``; ours
carry ``"runtime": "wurk_django"`` (server/heartbeat.py), Sidekiq's and Ruby wurk's
carry none. The queues Ruby processes serve are cached for :data:`REFRESH` seconds
per Redis and read again lazily, by the first push that needs them: a push of a
job with neither kwargs nor a result record looks at nothing, and one that has
them costs a round trip at most once per :data:`REFRESH` seconds. Any failure to
read the process set is ignored: a push never fails for this.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from . import keys, payload
from .text import to_text

logger = logging.getLogger("wurk_django.client.push")

REFRESH = 30.0  # seconds the queues Ruby processes serve are cached for
RUNTIME = "wurk_django"  # what our processes write as ``runtime`` in their ``info``

LOSSES = {
    "kwargs": "its kwargs (Sidekiq passes a job only its args)",
    "result": "its result record's updates (it stays PENDING, or enqueued for a tracked job, unless a Python "
              "process runs the job; "
              "a job Ruby buries is marked FAILURE by the dead-set sweep)",
}


def losses(job: dict) -> tuple[str, ...]:
    """What a Ruby worker would lose of ``job``: ``"kwargs"``, ``"result"``, both or none."""
    kwargs = "kwargs" if job.get("kwargs") else None
    # result_ttl: a Celery-style task's record; task: the django.tasks backend's; track: a
    # tracked job's status record (issue 47 item 2), the same record.
    result = "result" if "result_ttl" in job or "task" in job or "track" in job else None
    if kwargs is None and result is None:
        return ()
    return tuple(what for what in (kwargs, result) if what is not None)


def ruby_queues(entries: list[tuple[str, Any]]) -> dict[str, str]:
    """queue -> identity of a Ruby process serving it, from (identity, ``info``) pairs of
    the process set (``info`` None: a lapsed entry, skipped)."""
    served: dict[str, str] = {}
    for identity, info in entries:
        if not info:
            continue
        try:
            fields = payload.loads(info)
        except Exception:
            continue
        if not isinstance(fields, dict) or fields.get("runtime") == RUNTIME:
            continue
        queues = fields.get("queues")
        for name in queues if isinstance(queues, list) else ():
            if isinstance(name, str):
                served.setdefault(name, identity)
    return served


class _Cache:
    """The queues Ruby processes serve, per Redis, and which warnings this process gave."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queues: dict[str, tuple[float, dict[str, str]]] = {}  # redis -> (read at, queue -> identity)
        self._warned: set[tuple[str, str, str]] = set()  # (redis, queue, loss)

    def fresh(self, where: str) -> dict[str, str] | None:
        entry = self._queues.get(where)
        if entry is None or time.monotonic() - entry[0] > REFRESH:
            return None
        return entry[1]

    def store(self, where: str, served: dict[str, str]) -> None:
        self._queues[where] = (time.monotonic(), served)

    def failed(self, where: str) -> None:
        """Keep what was known (or nothing) for another interval: no retry per push."""
        entry = self._queues.get(where)
        self._queues[where] = (time.monotonic(), entry[1] if entry else {})

    def warn(self, where: str, jobs: list[tuple[dict, tuple[str, ...]]], served: dict[str, str]) -> None:
        for job, lost in jobs:
            queue = job.get("queue")
            identity = served.get(queue) if isinstance(queue, str) else None
            if identity is None:
                continue
            for what in lost:
                mark = (where, queue, what)
                with self._lock:
                    if mark in self._warned:
                        continue
                    self._warned.add(mark)
                logger.warning("queue %r is also served by the Ruby process %s: a %s job pushed there loses %s "
                               "if that process takes it (docs/interop.md, 'Routing queues')",
                               queue, identity, job.get("class"), LOSSES[what])

    def reset(self) -> None:
        with self._lock:
            self._queues.clear()
            self._warned.clear()


CACHE = _Cache()


def _at_risk(jobs: list[dict]) -> list[tuple[dict, tuple[str, ...]]]:
    return [(job, lost) for job in jobs if (lost := losses(job))]


def _where(config: Any) -> str:
    return str(getattr(config, "redis_url", "") or "")


def check(jobs: list[dict], config: Any, redis: Any) -> None:
    """Warn about the jobs of ``jobs`` a Ruby process would serve lossily (see the module)."""
    risky = _at_risk(jobs)
    if not risky:
        return
    where = _where(config)
    try:
        served = CACHE.fresh(where)
        if served is None:
            served = _learn(where, _entries, redis)
        CACHE.warn(where, risky, served)
    except Exception:
        logger.debug("could not tell whether a Ruby process serves the queue", exc_info=True)


async def acheck(jobs: list[dict], config: Any, redis: Any) -> None:
    """:func:`check` with an asyncio Redis client."""
    risky = _at_risk(jobs)
    if not risky:
        return
    where = _where(config)
    try:
        served = CACHE.fresh(where)
        if served is None:
            try:
                entries = await _aentries(redis)
            except Exception:
                CACHE.failed(where)
                raise
            served = _learn(where, lambda: entries)
        CACHE.warn(where, risky, served)
    except Exception:
        logger.debug("could not tell whether a Ruby process serves the queue", exc_info=True)


def _learn(where: str, read: Any, *args: Any) -> dict[str, str]:
    """The queues Ruby serves, from ``read(*args)``'s (identity, info) pairs, cached for
    :data:`REFRESH`; a failed read is cached as "none known" for as long (no retry per push)."""
    try:
        entries = read(*args)
    except Exception:
        CACHE.failed(where)
        raise
    served = ruby_queues(entries)
    CACHE.store(where, served)
    return served


def _entries(redis: Any) -> list[tuple[str, Any]]:
    members = [to_text(m) for m in redis.smembers(keys.PROCESSES)]
    pipe = redis.pipeline(transaction=False)
    for identity in members:
        pipe.hget(identity, "info")
    return list(zip(members, pipe.execute() if members else [], strict=True))


async def _aentries(redis: Any) -> list[tuple[str, Any]]:
    members = [to_text(m) for m in await redis.smembers(keys.PROCESSES)]
    pipe = redis.pipeline(transaction=False)
    for identity in members:
        pipe.hget(identity, "info")
    return list(zip(members, await pipe.execute() if members else [], strict=True))
