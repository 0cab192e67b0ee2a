"""Poison pills: a job that keeps taking its worker down is stopped (PRO-150..156).

Every time the reaper recovers a job from a dead process's private list, the
job's counter ``super_fetch:recovered:<jid>`` goes up (72 h TTL). On its third
recovery the job goes to the dead set with a :class:`Poisoned` error instead
of back to its queue. Any ACK deletes the counter: a run that reached its ACK
proves the job did not crash its worker.

The recovery callback (``RECOVERY_CALLBACK``, or :func:`super_fetch`) hears of
every job the reaper gives back, as ``callback(job_string, None)``, and of every
poison pill, as ``callback(job_string, pill)`` once the pill is buried.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis as redis_lib

from .. import context, keys, payload
from ..conf import Config
from ..errors import WurkError
from . import death

logger = logging.getLogger("wurk_django.worker")

RECOVERY_THRESHOLD = 3
RECOVERY_TTL = 72 * 3600


class Poisoned(WurkError):
    """Given to death handlers when a recovered job is killed as a poison pill."""


@dataclass(frozen=True)
class Pill:
    """A job recovered too often: what ``on_poison`` callbacks and the recovery callback learn."""

    jid: str
    klass: str | None
    count: int
    queue: str
    job_string: str
    #: The job's score in the dead set (epoch seconds), once buried there; ``None``
    #: before, and when the job said ``"dead": false`` and was discarded instead.
    dead_score: float | None = None


RecoveryCallback = Callable[[str, "Pill | None"], object]
_recovery_callback: RecoveryCallback | None = None


def super_fetch(callback: RecoveryCallback | None = None) -> None:
    """Sidekiq Pro's ``super_fetch!`` for this process. Reliable fetch is always on, so
    this only stores ``callback(job_string, pill)``, the recovery callback: the reaper
    calls it for every job it gives back (``pill`` is ``None``) and for every poison
    pill it buries (with the :class:`Pill`). ``None`` removes it. The
    ``RECOVERY_CALLBACK`` setting names one too; both are called."""
    global _recovery_callback
    if callback is not None and not callable(callback):
        raise ValueError(f"super_fetch() takes a callable (job_string, pill) or None, not {callback!r}")
    _recovery_callback = callback


def recovered(raw: bytes | str, pill: Pill | None = None, config: Config | None = None) -> None:
    """Tell the recovery callbacks that ``raw`` came back (``pill`` None) or was buried
    as a poison pill. A callback that raises is logged: recovery goes on regardless."""
    try:
        configured = context.config(config).recovery_callback
    except Exception:  # a setting that cannot be read must not stop the reaper either
        logger.exception("RECOVERY_CALLBACK could not be read")
        configured = None
    callbacks = [cb for cb in (configured, _recovery_callback) if cb is not None]
    if not callbacks:
        return
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
    for callback in callbacks:
        try:
            callback(text, pill)
        except Exception:
            logger.exception("recovery callback %r failed (job %s); recovery goes on", callback,
                             pill.jid if pill is not None else jid_of(raw if isinstance(raw, bytes) else raw.encode()))


_callbacks: list[Callable[[dict], None]] = []
_callbacks_lock = threading.Lock()


class Registration:
    def __init__(self, fn: Callable[[dict], None]) -> None:
        self.fn = fn

    def remove(self) -> None:
        with _callbacks_lock:
            if self.fn in _callbacks:
                _callbacks.remove(self.fn)


def on_poison(fn: Callable[[dict], None]) -> Registration:
    """Call ``fn({"jid", "klass", "count", "queue"})`` whenever a job is poisoned."""
    with _callbacks_lock:
        if not any(cb is fn for cb in _callbacks):
            _callbacks.append(fn)
    return Registration(fn)


def _key(jid: str) -> str:
    if not jid:
        raise ValueError("a poison counter needs a non-empty jid")
    return keys.recovered(jid)


def recovery_count(jid: str, redis: redis_lib.Redis | None = None) -> int:
    if not jid:
        return 0
    return int(context.redis(redis).get(_key(jid)) or 0)


def clear(jid: str, redis: redis_lib.Redis | None = None) -> None:
    if jid:
        context.redis(redis).delete(_key(jid))


def jid_of(raw: bytes) -> str | None:
    """The payload's jid when it is a readable job with a string jid, else ``None`` (never counted)."""
    try:
        job = payload.parse_job(raw)
    except Exception:  # refused later by the processor, with its reason
        return None
    jid = job.get("jid")
    return jid if isinstance(jid, str) and jid else None


def track(raw: bytes, queue: str, redis: redis_lib.Redis | None = None) -> Pill | None:
    """Count one recovery of ``raw``; return a :class:`Pill` if it is now poison.

    INCR and EXPIRE are two plain commands, never replayed: a replay after a
    lost reply would count twice and could kill a healthy job.
    """
    redis = context.redis(redis)
    try:
        job = payload.loads(raw)
    except Exception:
        return None
    if not isinstance(job, dict):
        return None
    jid = job.get("jid")
    if not isinstance(jid, str) or not jid:
        return None
    count = int(redis.incr(_key(jid)))
    redis.expire(_key(jid), RECOVERY_TTL)
    if count < RECOVERY_THRESHOLD:
        return None
    return Pill(jid, job.get("class"), count, queue, raw.decode("utf-8", "replace"))


def bury_pill(pill: Pill, raw: bytes, config: Config | None = None) -> Pill:
    """Move a poisoned job to the dead set (or discard it if ``dead: false``), notifying
    the death handlers, ``on_poison`` callbacks and the recovery callback (PRO-153).
    Returns the pill with its ``job_string`` and ``dead_score`` filled in."""
    error = Poisoned(f"{pill.klass or 'job'} was recovered {pill.count} times without completing")
    job = payload.loads(raw)
    logger.error("poison pill: %s (jid %s, queue %s)", error, pill.jid, pill.queue)
    score = None
    if job.get("dead") is not False:
        job.setdefault("failed_at", context.config(config).wire_format.now())
        job["error_class"] = f"{Poisoned.__module__}.{Poisoned.__qualname__}"
        job["error_message"] = str(error)
        score = time.time()
    try:
        stored = payload.dumps(job)
    except Exception:  # cannot be written back (parse_job refused it first in practice): keep the bytes
        stored = raw
    pill = dataclasses.replace(pill, job_string=pill.job_string or raw.decode("utf-8", "replace"),
                               dead_score=score)
    death.die(job, error, reason=death.POISON, config=context.config(config), raw=stored, now=score)
    info = {"jid": pill.jid, "klass": pill.klass, "count": pill.count, "queue": pill.queue}
    with _callbacks_lock:
        callbacks = list(_callbacks)
    for callback in callbacks:
        try:
            callback(info)
        except Exception:
            logger.exception("on_poison callback %r failed", callback)
    recovered(raw, pill, config)
    return pill
