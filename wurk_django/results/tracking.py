"""Status tracking for any job class (issue 47 item 2): the push side.

A job class (``track = True``, ``@job(track=True)``) or one push
(``SendReport.set(track=True)``) opts in; every other job is left exactly as it was.
The payload then carries ``track``: the seconds its record is kept after each change
(``True`` becomes ``WURK["TRACK_TTL"]`` at the push), a plain number a Ruby Sidekiq
process ignores. From there the job keeps the same result record as a Celery-style
task or a ``django.tasks`` task (``status:<jid>``, :mod:`.store`), written by the one
writer (:mod:`.record`): this module only normalizes the option and gives the push door
the commands that write the first record (``enqueued`` or ``scheduled``) in the push's
own round trip, so a reader never sees a tracked job without one.
"""

from __future__ import annotations

from typing import Any

from ..client.planning import Companions
from . import record, store

#: The payload key (and the class attribute, and the push option).
KEY = "track"
#: The longest a record may be kept: a year (a larger number is a unit mistake).
MAX_TTL = 366 * 86_400
RULE = f"True, False, None, or the seconds its status is kept (an int from 1 to {MAX_TTL}, or a timedelta)"


def problem(value: Any) -> str | None:
    """Why ``value`` cannot be a ``track`` option, or ``None``."""
    if value is None or isinstance(value, bool):
        return None
    seconds = value.total_seconds() if hasattr(value, "total_seconds") else value
    if isinstance(seconds, float) and seconds.is_integer():
        seconds = int(seconds)
    if not isinstance(seconds, int) or not 1 <= seconds <= MAX_TTL:
        return f"'track' must be {RULE}, not {value!r:.60}"
    return None


def normalize(job: dict, default_ttl: int) -> None:
    """At the push: ``track`` becomes the seconds its record is kept, or leaves the payload
    (``False``/``None``: a class's ``track`` turned off for one push). A bad value raises
    ``ValueError`` naming it, at the call site."""
    value = job.get(KEY)
    reason = problem(value)
    if reason:
        raise ValueError(f"job {job.get('class')}: {reason}")
    if value is None or value is False:
        job.pop(KEY, None)
        return
    if value is True:
        job[KEY] = int(default_ttl)
    else:
        job[KEY] = int(value.total_seconds() if hasattr(value, "total_seconds") else value)


def first_push(job: dict) -> bool:
    """Whether this push is the job's first: the engine's own re-pushes (a pause's, a
    limiter's reschedule) carry ``enqueued_at`` or ``overrated`` and keep the record as the
    run's end left it."""
    return "enqueued_at" not in job and "overrated" not in job


def _commands(job: dict) -> list[tuple[Any, ...]]:
    ttl = record.ttl_of(job)
    if ttl is None or not store.valid_id(job.get("jid")):
        return []
    return record.push_commands(job["jid"], record.first_fields(job), ttl)


def _here(job: dict) -> None:
    if record.keeps_record(job):
        record.pushed_here(job["jid"], record.first_fields(job))


#: What a tracked job's first push carries: the first record, in the push's round trip
#: (in this process's memory under a testing mode).
COMPANIONS = Companions(commands=_commands, in_process=_here)


def companions_for(job: dict, given: Companions) -> Companions:
    """The companions of a tracked job's push: its first record, unless the caller brings
    its own (a Celery-style call writes its record itself) or this is not its first push."""
    if given.commands is not None or not first_push(job):
        return given
    if not store.valid_id(job.get("jid")):
        raise ValueError(f"job {job.get('class')} is tracked: its jid {job.get('jid')!r} must be {store.ID_RULE}")
    if given.front is False and given.in_process is None:
        return COMPANIONS
    return Companions(commands=_commands, front=given.front, in_process=given.in_process or _here)
