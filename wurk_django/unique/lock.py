"""The unique lock: its key, its lifetime, taking it and giving it back (ENT-202..208).

One key per distinct job: ``unique:`` + SHA-256 of the canonical JSON of
``[class, queue, args]`` (or of what the job class's ``unique_context(job)``
returns); on a Redis Cluster ``{q:<queue>}:unique:<sha>``, in the slot of the job's
queue (issue 46 item 3: :mod:`wurk_django.redis.cluster_layout`), the client's Redis
deciding which (:func:`~wurk_django.redis.cluster_layout.layout_of`). The push, the
release after the job ran, the release when the job dies and :func:`locked` all
derive it here, from the job as stored, so they can never disagree, nor disagree
with Ruby processes sharing the database.

The key holds the jid of the job that owns it. Only the owner may delete it,
and the compare and the delete happen in one script: a lock that expired and
was taken by a newer job must survive a late release by the old one.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
import time
from typing import Any

import redis as redis_lib

from .. import canonical, context, registry
from ..redis.cluster_layout import SIDEKIQ, SidekiqLayout, layout_of
from ..redis.scripts import lua

logger = logging.getLogger("wurk_django.client.push")

UNTIL_SUCCESS = "success"
UNTIL_START = "start"
UNTIL_VALUES = (UNTIL_SUCCESS, UNTIL_START)


class UniqueConfigurationError(ValueError):
    """A unique job's options cannot work (a bad ``unique_for``, or ``encrypt`` with ``unique_for``)."""


def enabled(config: Any = None) -> bool:
    """True when ``WURK["UNIQUE_JOBS"]`` is on; until then ``unique_for`` is ignored."""
    if config is None:
        config = context.config()
    return bool(config.unique_jobs)


def coerce_ttl(value: Any) -> int | None:
    """Seconds a lock lives, from a ``unique_for`` value; ``None`` when the job is not unique.

    Accepts an int, a float (truncated) or a ``timedelta``; ``None`` and ``False``
    mean "not unique". Anything else, or less than one second, is a ``ValueError``.
    """
    if value is None or value is False:
        return None
    if isinstance(value, dt.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = value
    else:
        raise UniqueConfigurationError(f"unique_for must be seconds or a timedelta, not {value!r}")
    if not math.isfinite(seconds) or int(seconds) < 1:
        raise UniqueConfigurationError(f"unique_for must be at least 1 second, not {value!r}")
    return int(seconds)


def stored_ttl(value: Any) -> int | None:
    """The TTL of a payload's ``unique_for`` as read back (lenient: anything unusable means not unique)."""
    try:
        return coerce_ttl(value)
    except UniqueConfigurationError:
        return None


_warned_until: set[str] = set()


def check_until(value: Any) -> None:
    """Warn (once per value) about a ``unique_until`` that is neither value: it counts as
    "success", as it does on every worker, Ruby's too (ENT-202)."""
    if value is not None and value not in UNTIL_VALUES:
        text = repr(value)
        if text not in _warned_until:
            _warned_until.add(text)
            logger.warning("unique_until %s is not 'success' or 'start': the lock is held until success", text)


def context_of(job: dict) -> Any:
    """What identifies the job: the class's ``unique_context(job)`` if it has one,
    else ``[class, queue, args]`` as stored (plus ``kwargs`` when the job has keyword arguments,
    so jobs that differ only there are not duplicates; without them the digest is Sidekiq's)."""
    job_class = registry.registered().get(job.get("class"))
    hook = getattr(job_class, "unique_context", None)
    if callable(hook):
        return hook(job)
    if job.get("kwargs"):
        return [job.get("class"), job.get("queue"), job.get("args"), job["kwargs"]]
    return [job.get("class"), job.get("queue"), job.get("args")]


def lock_key(job: dict, layout: SidekiqLayout = SIDEKIQ) -> str:
    """The Redis key of ``job``'s lock (in ``layout``: on a cluster, in its queue's slot)."""
    return layout.unique_lock(str(job.get("queue") or ""), canonical.sha256_hex(context_of(job)))


def lifetime(ttl: int, at: Any, now: float | None = None) -> int:
    """A scheduled job's lock covers the wait as well as the run: ``ttl`` plus the seconds until ``at``."""
    if at is None:
        return ttl
    wait = math.ceil(float(at) - (time.time() if now is None else now))
    return ttl + wait if wait > 0 else ttl


def acquire(client: redis_lib.Redis, key: str, jid: str, ttl: int) -> tuple[bool, str | None]:
    """Take the lock for ``jid``: ``(taken_now, holder)``; the holder is ``jid`` itself
    when this call took it or the same job already held it."""
    taken, holder = lua("unique/lua/acquire")(client, [key], [jid, ttl])
    return bool(taken), holder.decode() if isinstance(holder, bytes) else holder


def release_if_owner(client: redis_lib.Redis, key: str, owner: str) -> bool:
    """Delete ``key`` if and only if it still holds ``owner``; True when deleted."""
    return bool(lua("unique/lua/release_if_owner")(client, [key], [owner]))


def release(job: dict, client: redis_lib.Redis | None = None) -> bool:
    """Give back ``job``'s lock if the job still owns it (on ``client``; by default the
    running job's Redis, or the settings' outside a job)."""
    if client is None:
        client = context.layout_redis()
    return release_if_owner(client, lock_key(job, layout_of(client)), job["jid"])


def locked(*spec: Any, redis: redis_lib.Redis | None = None) -> str | None:
    """The jid holding the lock of a job, or ``None``: ``locked(SyncAccount, [42])``
    or ``locked("critical", SyncAccount, [42])``.

    Without a queue, the job class's own ``queue`` option is used (for a class
    name, ``DEFAULT_JOB_OPTIONS["queue"]``).
    """
    from ..client.push import _job_class_of

    if len(spec) == 2:
        klass, args = spec
        queue = None
    elif len(spec) == 3:
        queue, klass, args = spec
    else:
        raise TypeError("locked() takes (job_class, args) or (queue, job_class, args)")
    if not isinstance(args, (list, tuple)):
        raise ValueError(f"locked() needs the job's arguments as a list, not {args!r}")
    config = context.config()
    job_class = _job_class_of(klass)
    name = job_class.job_name if job_class is not None else str(klass)
    if queue is None:
        options = job_class.get_options() if job_class is not None else {}
        queue = options.get("queue") or config.default_job_options.get("queue") or "default"
    job = {"class": name, "queue": str(queue), "args": list(args)}
    if redis is None:
        redis = context.layout_redis(config=config)
    holder = redis.get(lock_key(job, layout_of(redis)))
    return holder.decode() if isinstance(holder, bytes) else holder


def release_on_death(job: dict, exc: BaseException, reason: str) -> None:
    """Death handler: a job the engine gave up on frees its lock; a kill by a person
    (admin or API) keeps it until it expires, as in Sidekiq Enterprise. Also where
    ``UNIQUE_JOBS`` is off: the pusher may have taken the lock all the same."""
    from .. import death

    if reason == death.MANUAL or isinstance(exc, death.JobKilled):
        return
    where = context.current()  # the job's, or the one die() made for a death outside a job
    if not job.get("jid") or stored_ttl(job.get("unique_for")) is None:
        return
    release(job, where.redis)
