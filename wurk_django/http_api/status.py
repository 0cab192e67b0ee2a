"""Where a job is now, for ``GET /v1/jobs/<jid>``: the one function the endpoint calls.

A job that keeps a status record (:mod:`wurk_django.results`: a tracked class, a Celery
task, a ``django.tasks`` result) is looked for in the places a job can be, in the order a
job moves through them while it is looked for (a running job has left its queue; a retry
leaves the retry set for its queue): the running work, the schedule, the retry and dead
sets, each queue (or only the one the caller names), then the workers' private lists (a
job fetched but not yet in its worker's work, written at the worker's next heartbeat, is
running too). The record itself is added (state, progress and message, result, last
error, timings) as :func:`wurk_django.status.get` reads it, without the stored tracebacks,
which may quote private data. Extending what a status says (progress, timings) means
extending this function and :data:`STATES`, nothing else.

A job with no record is looked for only where that is bounded: the running work (one read
per live process) and the queue the caller names (``?queue=``), since nothing else says
which queue it is in. The sets have no index by jid, and a search of them, of every queue
or of the keyspace would cost in proportion to everything stored, whoever asks:
:func:`job_status` answers ``None`` for such a job (the endpoint's 404 ``job-unknown``).

Costs for a job with a record: the record is read first (one ``HGETALL``); the sets are
searched with ``ZSCAN MATCH *<jid>*``, the queues linearly and the private lists by a
``SCAN`` of the keyspace (only when every other place missed). A job whose record is
final (``complete``, ``failed``, ``revoked``) is in no worker's hands: neither the running
work nor the private lists are searched for it, so it never reads ``running`` after its
end (its worker's work is rewritten at its next heartbeat) and its lookup never scans the
keyspace. A job moving between two places while it is looked for may be reported
``unknown`` for that one read.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .. import context, keys
from .. import status as tracked
from ..api import DeadSet, JobRecord, Queue, RetrySet, ScheduledSet, WorkSet

QUEUED = "queued"
SCHEDULED = "scheduled"
RETRY = "retry"
DEAD = "dead"
RUNNING = "running"
UNKNOWN = "unknown"
#: Every ``state`` a status may have.
STATES = (QUEUED, SCHEDULED, RETRY, DEAD, RUNNING, UNKNOWN)


def _epoch(moment: datetime | None) -> float | None:
    return None if moment is None else moment.timestamp()


def _described(record: JobRecord) -> dict[str, Any]:
    """What a status shows of a stored job (no arguments: they may be private)."""
    fields: dict[str, Any] = {
        "class": record.display_class,
        "queue": record.queue,
        "created_at": _epoch(record.created_at),
        "enqueued_at": _epoch(record.enqueued_at),
    }
    if record.get("retry_count") is not None:
        fields["retry_count"] = record.get("retry_count")
    if record.error_class:
        fields["error_class"] = record.error_class
        fields["error_message"] = record.error_message
    return fields


def _where(jid: str, *, finished: bool = False, queue: str | None = None) -> dict[str, Any]:
    # A job whose record is final is in no worker's hands: the work its worker lists until
    # its next heartbeat, and its private list until the acknowledgement, would say
    # ``running`` a moment after it ended. The sets and queues are still searched (a
    # failed job sits in the dead set).
    work = None if finished else _running(jid)
    if work is not None:
        return work
    for state, jobs in ((SCHEDULED, ScheduledSet()), (RETRY, RetrySet()), (DEAD, DeadSet())):
        entry = jobs.find_job(jid)
        if entry is not None:
            return {"state": state, **_described(entry), "at": entry.score}
    for where in ([Queue(queue)] if queue is not None else Queue.all()):
        found = _queued(jid, where)
        if found is not None:
            return found
    if finished:
        return {"state": UNKNOWN}  # and no keyspace SCAN for a job that left no other trace
    return _fetched(jid) or {"state": UNKNOWN}


def _running(jid: str) -> dict[str, Any] | None:
    work = WorkSet().find_work(jid)
    if work is None:
        return None
    return {"state": RUNNING, **_described(work.job), "queue": work.queue, "started_at": _epoch(work.run_at)}


def _queued(jid: str, queue: Queue) -> dict[str, Any] | None:
    record = queue.find_job(jid)
    return None if record is None else {"state": QUEUED, **_described(record), "queue": queue.name}


def _untracked(jid: str, queue: str | None) -> dict[str, Any] | None:
    """A job with no record: running (the work each live process lists) or in the named queue."""
    return _running(jid) or (_queued(jid, Queue(queue)) if queue is not None else None)


def _fetched(jid: str) -> dict[str, Any] | None:
    """A job a worker fetched into its private list and has not shown in its work yet (that
    is written at its next heartbeat): running too. Asked last, as it SCANs the keyspace."""
    redis = context.redis()
    needle = jid.encode()
    for key in redis.scan_iter(match=keys.PRIVATE_ALL, count=1000):
        for raw in redis.lrange(key, 0, -1):
            if needle not in raw:
                continue
            name = (key.decode() if isinstance(key, bytes) else key)[len(keys.QUEUE_PREFIX):].rsplit("|", 4)[0]
            record = JobRecord(raw, name)
            if record.jid == jid:
                return {"state": RUNNING, **_described(record), "queue": name, "started_at": None}
    return None


def job_status(jid: str, queue: str | None = None, *, everywhere: bool = False) -> dict[str, Any] | None:
    """``{"jid", "state", ...where it is..., "result"}`` for ``jid``: ``state`` is one of
    :data:`STATES`; ``result`` is the job's status record (a tracked job's, a Celery task's
    or a ``django.tasks`` result: :meth:`wurk_django.status.Status.as_dict` without
    ``errors``) or ``None``. ``queue``: the only queue searched (the caller knows it).
    ``None`` for a job with no record found in neither the running work nor ``queue``
    (unknown or untracked: see the module's docstring), unless ``everywhere`` (a ``DELETE``,
    admin scope, which tells a queued, running or dead job from none): then it is looked for
    as a tracked job is."""
    record = tracked.get(jid) if tracked.valid_id(jid) else None
    if record is None and everywhere:
        return {"jid": jid, **_where(jid, queue=queue), "result": None}
    if record is None:
        where = _untracked(jid, queue)
        return None if where is None else {"jid": jid, **where, "result": None}
    status: dict[str, Any] = {"jid": jid, **_where(jid, finished=record.finished, queue=queue)}
    shown = record.as_dict()
    shown.pop("errors", None)  # whole tracebacks: the last error's class and message stay
    status["result"] = shown
    return status
