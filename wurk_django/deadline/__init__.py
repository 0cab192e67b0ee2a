"""Deadlines (issue 47 item 5): an absolute time by which a job must have run.

A push may carry ``deadline`` (an aware datetime, or epoch seconds); the client
stores it in the payload as a plain number under the key ``deadline``, which a
Ruby Sidekiq process ignores. Then:

* a job not started by its deadline is not run: it goes to the dead set with
  :class:`~wurk_django.errors.DeadlineExceeded` as its error, or is discarded
  when pushed with ``deadline_action="discard"`` (:mod:`.middleware`, at the
  place where expired jobs are skipped);
* a job still running at its deadline is stopped as at a hard time limit: the
  watchdog abandons its thread and the one settlement books it
  (:mod:`wurk_django.server.stopping.watchdog`, :mod:`wurk_django.server.run.manager`);
* a failure whose retry would come after the deadline is not retried: the dead
  set (or the discard) instead (:mod:`wurk_django.server.retry`);
* a scheduled push whose run time is after its deadline is refused at the call.

A job without the key pays nothing beyond the middleware's ``applies`` look-up.
This module holds the rules both sides share; it imports nothing of the worker.
"""

from __future__ import annotations

import datetime as dt
import math
from typing import Any

#: The payload key: epoch seconds (a JSON number).
KEY = "deadline"
#: The payload key of the option saying what a job past its deadline becomes; only
#: ``"discard"`` is stored (the dead set is the default and needs no key).
ACTION = "deadline_action"
DEAD = "dead"
DISCARD = "discard"
ACTIONS = (DEAD, DISCARD)

#: Epoch seconds below this are refused: a deadline before 2001-09-09 is a mistake,
#: most likely a relative number of seconds meant for ``perform_in``.
_EPOCH_FLOOR = 1_000_000_000


def shown(epoch: float) -> str:
    """``epoch`` as a readable UTC time, for messages."""
    try:
        return dt.datetime.fromtimestamp(epoch, dt.UTC).isoformat(timespec="milliseconds")
    except (OverflowError, OSError, ValueError):
        return repr(epoch)


def to_epoch(value: Any) -> float:
    """Epoch seconds of a deadline given at a push; ``ValueError`` naming a bad value
    (a naive datetime, a string, a number that is no epoch time)."""
    if isinstance(value, dt.datetime):
        if value.tzinfo is None or value.utcoffset() is None:
            raise ValueError(f"job option 'deadline' must be an aware datetime (with a tzinfo), not the naive "
                             f"{value!r}: a naive time is ambiguous across servers")
        return value.timestamp()
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (isinstance(value, float) and not math.isfinite(value))):
        raise ValueError(f"job option 'deadline' must be an aware datetime or epoch seconds, not {value!r:.60}")
    if value < _EPOCH_FLOOR:
        raise ValueError(f"job option 'deadline' must be an absolute time (epoch seconds), not {value!r}: "
                         f"for a delay use perform_in, for a relative cut-off time_limit or expires_in")
    return float(value)


def normalize(job: dict) -> None:
    """At the push: ``deadline`` becomes epoch seconds and ``deadline_action`` is checked;
    a bad value raises ``ValueError`` naming it. A run time (``at``) after the deadline
    is refused: the job could never start."""
    value = job.get(KEY)
    action = job.pop(ACTION, None)
    if value is None:
        job.pop(KEY, None)
        return
    if action is not None and action not in ACTIONS:
        raise ValueError(f"job option 'deadline_action' must be one of {ACTIONS}, not {action!r}")
    job[KEY] = to_epoch(value)
    if action == DISCARD:
        job[ACTION] = DISCARD
    check_at(job)


def check_at(job: dict) -> None:
    """Refuse a job scheduled to run after its own deadline."""
    deadline, at = job.get(KEY), job.get("at")
    if deadline is not None and at is not None and isinstance(at, (int, float)) and at > deadline:
        raise ValueError(f"job {job.get('class')} is scheduled at {shown(at)}, after its deadline "
                         f"{shown(deadline)}: it could never run")


def passed(deadline: Any, now: float) -> bool:
    """True when ``deadline`` (from a payload) is before ``now``; an unreadable value
    (written by another client) is no deadline, never a crash."""
    try:
        return now > float(deadline)
    except (TypeError, ValueError):
        return False


def discards(job: dict) -> bool:
    """Whether a job past its deadline is discarded rather than kept in the dead set."""
    return job.get(ACTION) == DISCARD
