"""Revoking a job by jid: cancel it where it waits, or stop it where it runs (issue 27 item 4).

::

    from wurk_django.api.revoke import revoke

    revoke(jid, by="alice")                  # queued, scheduled or waiting to retry: cancelled
    revoke(jid, by="alice", terminate=True)  # running too: soft stop, then hard stop

A revoked job is recorded in the dead set, its error (``wurk_django.errors.JobRevoked``)
naming who revoked it (``by``) and when; the entry also carries ``revoked_by``.

On a Redis Cluster (issue 46 item 3) the same steps run in the cluster layout (the marker
``{wurk}:revoked``, each queue's own sets and list); a running job is told through the
signals list of the process running it, read at that worker's next beat.
"""

from __future__ import annotations

import time
from typing import Any

from .. import context, death, keys, payload, revocation
from ..redis import pools
from ..redis.cluster_layout import CLUSTER, layout_of
from ..redis.scripts import lua
from ..text import to_text
from ._base import RedisClient, conn
from .process import SIGNAL_TTL, ProcessSet, WorkSet
from .queue import Queue, _needles
from .sorted import DeadSet, RetrySet, ScheduledSet

__all__ = ["revoke", "QUEUED", "SCHEDULED", "RETRY", "RUNNING", "MARKED"]

QUEUED = "queued"  # removed from its queue
SCHEDULED = "scheduled"  # removed from the schedule
RETRY = "retry"  # removed from the retry set
RUNNING = "running"  # a stop request went to the process running it
MARKED = "marked"  # found nowhere: only the marker, so it never starts if it turns up


def revoke(jid: str, *, by: str | None = None, terminate: bool = False, redis: RedisClient | None = None) -> str:
    """Revoke job ``jid``; returns where it was found (one of the constants above).

    First a short-lived marker (``revocation.MARKER_TTL``) that every worker process
    checks before running a job: a job in flight between lists while this looks (the
    scheduler moving it, a worker's fetch) never runs. The same round trip publishes
    the revoke on the revoke channel, which every worker process hears at once (within
    milliseconds): with ``terminate``, the process running the job stops it then.
    Then the schedule and the retry set (``ZSCAN``), then every queue (one atomic
    server-side delete per queue), in the direction jobs flow: a job moving on
    meanwhile is found at a later step. Found there, it goes to the dead set now.

    Otherwise, if it is running and ``terminate`` is true, the process running it raises
    ``SoftTimeLimitExceeded`` in the job's thread as it hears the revoke, then,
    ``WURK["REVOKE_GRACE"]`` seconds later, abandons the thread and replaces it; the
    process records the dead entry and the result record (if any) reads revoked. The
    command also goes through the process's signal list, read at its next heartbeat
    (within 10 s): the fallback for a process whose subscription was down when the
    revoke was published. Without ``terminate`` a running job runs on (the marker stays).
    """
    if not isinstance(jid, str) or not jid.strip():
        raise ValueError(f"revoke needs a non-empty jid, not {jid!r}")
    if by is not None and not isinstance(by, str):
        raise ValueError(f"revoke's 'by' must be a string naming who revokes, not {by!r}")
    clustered = context.layout_redis(redis)
    if layout_of(clustered).cluster:
        return _on_cluster(clustered, jid, by, terminate)
    client = conn(redis)
    at = time.time()
    command = revocation.command(jid, by, at, terminate=terminate)
    pipe = client.pipeline(transaction=True)
    pipe.zadd(revocation.KEY, {revocation.marker(jid, by, at): at + revocation.MARKER_TTL})
    pipe.zremrangebyscore(revocation.KEY, "-inf", at)
    # After the marker, in the same MULTI: a process that hears this finds the marker there
    # at its next beat too, so what it heard is never undone by a beat that read before it.
    pipe.publish(revocation.channel(pools.database_of(client)), command)
    pipe.execute()
    exc = revocation.revoked_error(by, at)
    for where, jobs in ((SCHEDULED, ScheduledSet(redis=redis)), (RETRY, RetrySet(redis=redis))):
        entry = jobs.find_job(jid)
        if entry is not None:
            raw = entry._take()
            if raw is not None:
                _bury(raw, exc, by, redis)
                return where
    for name in sorted(to_text(q) for q in client.smembers(keys.QUEUES)):
        record = Queue(name, redis=redis).delete_job(jid)
        if record is not None:
            _bury(record.value, exc, by, redis)
            return QUEUED
    if not terminate:
        return MARKED
    return _tell_running(client, jid, command)


def _tell_running(client: Any, jid: str, command: str) -> str:
    """The stop command to the process running ``jid`` through its signals list (its layout's
    key), or to every live process when none lists it yet; ``RUNNING`` or ``MARKED``."""
    work = WorkSet(redis=client).find_work(jid)
    # Not listed as running yet (the busy lists are a beat behind): every live process is told.
    targets = [work.process_id] if work is not None else [p.identity for p in ProcessSet(redis=client)]
    layout = layout_of(client)
    # One MULTI on one server; on a cluster each process's list is in its own slot.
    pipe = client.pipeline(transaction=not layout.cluster)
    for identity in targets:
        key = layout.signals(identity)
        pipe.lpush(key, command)
        pipe.expire(key, SIGNAL_TTL)
    pipe.execute()
    return RUNNING if work is not None else MARKED


def _bury(raw: bytes | str, exc: BaseException, by: str | None, redis: RedisClient | None) -> None:
    job = payload.loads(raw)
    if not isinstance(job, dict):
        DeadSet(redis=redis).kill(raw, ex=exc)
        return
    job.update({"error_class": f"{type(exc).__module__}.{type(exc).__qualname__}", "error_message": str(exc),
                "failed_at": context.config().wire_format.now(),
                "revoked_by": by or ""})
    DeadSet(redis=redis).kill(job, ex=exc)


def _on_cluster(client: Any, jid: str, by: str | None, terminate: bool) -> str:
    """:func:`revoke` on a Redis Cluster (issue 46 item 3), in the same order: the marker
    (``{wurk}:revoked``, which a cluster worker reads at each beat and checks every job
    against before running it), then each known queue's own schedule and retry sets, then
    each queue's list (one script in the queue's slot). A job found is buried in its
    queue's dead set, the death handlers told, as on one server. A running job
    (``terminate``) is told to the process running it, or to every live process when none
    lists it yet, through its signals list ``{p:<identity>}:signals``: a cluster worker
    pops that list at each beat (every 10 s; there is no revoke channel on a cluster),
    and stops the job as one server's worker does."""
    at = time.time()
    pipe = client.pipeline(transaction=False)
    pipe.zadd(CLUSTER.revoked, {revocation.marker(jid, by, at): at + revocation.MARKER_TTL})
    pipe.zremrangebyscore(CLUSTER.revoked, "-inf", at)
    pipe.execute()
    exc = revocation.revoked_error(by, at)
    names = sorted(to_text(q) for q in client.smembers(CLUSTER.queues))
    for where, set_of in ((SCHEDULED, CLUSTER.schedule), (RETRY, CLUSTER.retry)):
        for name in names:
            raw = _take_from_set(client, set_of(name), jid)
            if raw is not None:
                _bury_on(client, raw, exc, by)
                return where
    for name in names:
        raw = lua("fast_delete_job")(client, [CLUSTER.queue(name)], _needles("jid", jid))
        if raw:
            _bury_on(client, raw, exc, by)
            return QUEUED
    if not terminate:
        return MARKED
    return _tell_running(client, jid, revocation.command(jid, by, at, terminate=True))


def _take_from_set(client: Any, key: str, jid: str) -> bytes | None:
    """The member of the sorted set ``key`` whose jid is ``jid``, removed (``ZREM``: whoever
    removes it owns it), or ``None``."""
    for member, _score in client.zscan_iter(key, match=f"*{jid}*", count=100):
        try:
            found = payload.loads(member).get("jid")
        except (ValueError, AttributeError):
            continue
        if found == jid and client.zrem(key, member):
            return member
    return None


def _bury_on(client: Any, raw: bytes | str, exc: BaseException, by: str | None) -> None:
    """:func:`_bury` through the cluster client: into the job's own queue's dead set."""
    config = context.config()
    job = payload.loads(raw)
    if isinstance(job, dict):
        job.update({"error_class": f"{type(exc).__module__}.{type(exc).__qualname__}", "error_message": str(exc),
                    "failed_at": config.wire_format.now(), "revoked_by": by or ""})
        raw = payload.dumps(job)
    death.die(death.parse_or_raw(raw), exc, reason=death.MANUAL, config=config, redis=client, raw=raw)
