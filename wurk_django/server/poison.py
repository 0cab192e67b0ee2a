"""Poison pills: a job that keeps taking its worker down is stopped (PRO-150..156).

Every time the reaper recovers a job from a dead process's private list, the
job's counter ``super_fetch:recovered:<jid>`` goes up (72 h TTL). On its third
recovery the job goes to the dead set with a :class:`Poisoned` error instead
of back to its queue. Any ACK deletes the counter: a run that reached its ACK
proves the job did not crash its worker.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

import redis as redis_lib

from .. import keys, payload
from ..conf import Config, get_config
from ..connection import get_redis
from ..errors import WurkError
from . import death

logger = logging.getLogger("wurk_django.worker")

RECOVERY_THRESHOLD = 3
RECOVERY_TTL = 72 * 3600


class Poisoned(WurkError):
    """Given to death handlers when a recovered job is killed as a poison pill."""


@dataclass(frozen=True)
class Pill:
    jid: str
    klass: str | None
    count: int
    queue: str
    job_string: str


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
    return int((redis or get_redis()).get(_key(jid)) or 0)


def clear(jid: str, redis: redis_lib.Redis | None = None) -> None:
    if jid:
        (redis or get_redis()).delete(_key(jid))


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
    redis = redis or get_redis()
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


def bury_pill(pill: Pill, raw: bytes, config: Config | None = None) -> None:
    """Move a poisoned job to the dead set (or discard it if ``dead: false``), notifying
    the death handlers and ``on_poison`` callbacks (PRO-153)."""
    error = Poisoned(f"{pill.klass or 'job'} was recovered {pill.count} times without completing")
    job = payload.loads(raw)
    logger.error("poison pill: %s (jid %s, queue %s)", error, pill.jid, pill.queue)
    if job.get("dead") is not False:
        job.setdefault("failed_at", (config or get_config()).wire_format.now())
        job["error_class"] = f"{Poisoned.__module__}.{Poisoned.__qualname__}"
        job["error_message"] = str(error)
    try:
        stored = payload.dumps(job)
    except Exception:  # cannot be written back (parse_job refused it first in practice): keep the bytes
        stored = raw
    death.die(job, error, reason=death.POISON, config=config or get_config(), raw=stored)
    info = {"jid": pill.jid, "klass": pill.klass, "count": pill.count, "queue": pill.queue}
    with _callbacks_lock:
        callbacks = list(_callbacks)
    for callback in callbacks:
        try:
            callback(info)
        except Exception:
            logger.exception("on_poison callback %r failed", callback)
