"""The death path: the one way a job stops for good (CORE-126, CORE-140/141, PRO-153, ENT-207).

Whatever ends a job — retries exhausted, ``retry: false`` and a failure, a
``dead: false`` discard, a poison pill, a payload that cannot run, a due job
the scheduler could not push, a kill from the admin or the data API — calls
:func:`die`. It does the same four things in the same order every time:

1. stores the entry in the ``dead`` set (unless the job is discarded or was
   never meant to be kept) and trims the set, in one MULTI;
2. runs the built-in death handlers that features registered
   (:func:`register_handler`: a batch records the death, a unique lock is
   released...); they find the config and the Redis of the death in
   :func:`wurk_django.context.current`, the running job's or, for a death
   outside a job, one :func:`die` makes for them;
3. runs the user's ``WURK["DEATH_HANDLERS"]``;
4. sends the ``job_died`` signal (the ``django.tasks`` backend marks its
   result FAILED there).

A handler that raises is logged and the rest still run: the job is already
where it belongs. A kill by a person (admin or ``DeadSet.kill``) passes a
:class:`JobKilled`, so handlers can tell it from a death the engine decided
(ENT-207: a unique lock survives a manual kill).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from redis.cluster import RedisCluster

from . import context, keys, payload, registry, signals
from .errors import WurkError
from .positioned import Positioned
from .redis.cluster_layout import CLUSTER

logger = logging.getLogger("wurk_django.worker")

# Why a job died; handlers receive one of these.
EXHAUSTED = "exhausted"  # retries used up (or retry_for elapsed), or retry_in said "kill"
NO_RETRY = "no_retry"  # retry: false (or 0) and the job raised: handlers run, nothing is stored
DISCARDED = "discarded"  # dead: false, or a hook said "discard": handlers run, nothing is stored
POISON = "poison"  # recovered from crashed workers too many times
INVALID = "invalid"  # a payload that cannot run (not JSON, not an object, no class/args...)
SCHEDULER = "scheduler"  # a due job the scheduler could not push
MANUAL = "manual"  # killed from the admin or the data API
DEADLINE = "deadline"  # its deadline passed before it started, or before its retry (issue 47 item 5)
REASONS = (EXHAUSTED, NO_RETRY, DISCARDED, POISON, INVALID, SCHEDULER, MANUAL, DEADLINE)
_NOT_STORED = (NO_RETRY, DISCARDED)
# ``dead: false`` is the job's wish about its own failures. A payload that cannot
# run, a due job that could not be pushed and a kill by a person did not fail:
# they are stored whatever the payload says, or they would be lost.
_ALWAYS_STORED = (INVALID, SCHEDULER, MANUAL)


class JobKilled(RuntimeError, WurkError):
    """The exception a manual kill passes to death handlers (a ``RuntimeError``, as Sidekiq's)."""

    def __init__(self, message: str = "Job killed by API") -> None:
        super().__init__(message)


DeathHandler = Callable[[dict, BaseException, str], Any]
_handlers: Positioned[DeathHandler] = Positioned()


def register_handler(name: str, handler: DeathHandler, *, position: int = 0) -> None:
    """Add (or replace) built-in death handler ``name``: ``handler(job, exc, reason)``.

    Built-in handlers run before the user's ``DEATH_HANDLERS``, lowest position first.
    """
    _handlers.add(name, handler, position)


def unregister_handler(name: str) -> None:
    _handlers.remove(name)


def store(client: Any, raw: bytes | str, *, max_jobs: int, timeout: int, trim: bool = True,
          now: float | None = None) -> None:
    """``ZADD dead`` plus both trims in one MULTI (CORE-140).

    The rank trim is issued exactly as Sidekiq does (``0 .. -max_jobs``), which
    keeps at most ``max_jobs - 1`` entries.
    """
    now = time.time() if now is None else now
    name = keys.DEAD
    if isinstance(client, RedisCluster):
        # A Redis Cluster (issue 46): the job's own queue's dead set, one MULTI on the node
        # of that queue's slot (the size limit applies per queue there).
        name = CLUSTER.dead(_queue_of(raw))
        client = client.get_redis_connection(client.get_node_from_key(name))
    pipe = client.pipeline(transaction=True)
    pipe.zadd(name, {raw: now})
    if trim:
        pipe.zremrangebyscore(name, "-inf", now - timeout)
        pipe.zremrangebyrank(name, 0, -max_jobs)
    pipe.execute()


def _queue_of(raw: bytes | str) -> str:
    """The queue of a dead entry on a cluster; an entry without one goes to ``default``'s set."""
    queue = parse_or_raw(raw).get("queue")
    return queue if isinstance(queue, str) and queue else "default"


def parse_or_raw(raw: bytes | str) -> dict:
    """The job as a dict; an unreadable entry becomes ``{"args": [text]}`` so nothing is lost."""
    try:
        job = payload.loads(raw)
    except Exception:  # unparseable data is shown as it is
        job = None
    if not isinstance(job, dict):
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        return {"args": [text]}
    return job


def die(job: dict | None, exc: BaseException, *, reason: str, config: Any, redis: Any = None,
        raw: bytes | str | None = None, job_class: Any = None, trim: bool = True, notify: bool = True,
        stored: bool = False, now: float | None = None) -> None:
    """End ``job`` for good: store it (with ``raw`` as the stored bytes when given),
    then handlers, then ``job_died``. ``job`` may be ``None`` when only ``raw`` exists
    (an unparseable payload): handlers then get :func:`parse_or_raw`'s dict.
    ``stored=True``: a script already put it in the dead set atomically with taking it
    from where it was; only the handlers and the signal remain. ``now``: the dead-set
    score (default: the time of the call)."""
    if reason not in REASONS:
        raise ValueError(f"unknown death reason {reason!r}; one of {REASONS}")
    if job is None:
        if raw is None:
            raise ValueError("die() needs the job or its raw bytes")
        job = parse_or_raw(raw)
    if redis is None:
        redis = context.redis_for(config)
    if stored:
        pass
    elif reason in _ALWAYS_STORED or (reason not in _NOT_STORED and job.get("dead") is not False):
        store(redis, raw if raw is not None else payload.dumps(job), max_jobs=config.dead_max_jobs,
              timeout=config.dead_timeout, trim=trim, now=now)
    elif reason not in _NOT_STORED:
        job["discarded_at"] = config.wire_format.now()
    if not notify:
        return
    running = context.running()
    if running is not None and running.config is config and running.redis is redis:
        _notify(job, exc, reason, config, job_class)
        return
    # A death outside a job (the dashboard, the reaper, the scheduler) or on another
    # Redis: handlers and receivers read where it happened from the context, as in a job.
    token = context.enter(context.JobContext(config, redis, raw=raw, job=job))
    try:
        _notify(job, exc, reason, config, job_class)
    finally:
        context.leave(token)


def die_as_fetched(where: Any, exc: BaseException, *, reason: str, job: dict | None = None,
                   **fields: Any) -> dict:
    """End the running job for good: the entry is the job as it was fetched
    (``where.raw``), never as a middleware changed it in memory (an argument it
    decrypted, say), plus ``fields`` (``error_class``, ``error_message``...).
    ``job`` stands in for the bytes when there are none (a job run outside a
    worker). Returns the entry handed to the handlers."""
    base = payload.loads(where.raw) if where.raw is not None else dict(job or {})
    entry = {**base, **fields}
    die(entry, exc, reason=reason, config=where.config, redis=where.redis,
        job_class=where.job_class)
    return entry


def _notify(job: dict, exc: BaseException, reason: str, config: Any, job_class: Any) -> None:
    run_handlers(job, exc, reason, config)
    signals.send(signals.job_died, job_class or _job_class(job), job=job, exception=exc, reason=reason)


def _job_class(job: dict) -> Any:
    """The job class registered for the payload's ``class``, so receivers connected with
    ``sender=SomeJob`` hear deaths decided outside a run (poison, kills, the scheduler);
    the name itself when this process knows no such class."""
    name = job.get("class")
    if not isinstance(name, str):
        return name
    try:
        return registry.resolve(name)
    except Exception:  # unknown here, or an import that fails: the name still identifies it
        return name


def run_handlers(job: dict, exc: BaseException, reason: str, config: Any) -> None:
    """Built-in handlers, then the user's; each failure is logged and the rest still run."""
    # Lazy: features.install() imports the feature packages, whose install() imports
    # this module to register here; and it must run at first use, not at import.
    from . import features

    features.install(features.DEATH)  # not the server part: a kill from the data API loads no engine
    for handler in _handlers.ordered:
        try:
            handler(job, exc, reason)
        except Exception:
            logger.exception("built-in death handler %r failed for job %s", handler, job.get("jid"))
    for handler in config.death_handlers:
        try:
            handler(job, exc)
        except Exception:
            logger.exception("death handler %r failed for job %s", handler, job.get("jid"))
