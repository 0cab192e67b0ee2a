"""Per-job time limits: the payload keys ``soft_time_limit`` and ``time_limit`` (issue 27 item 3).

Both are seconds (a number > 0; a timedelta is accepted where a job is pushed and
stored as seconds). ``soft_time_limit``: :class:`~wurk_django.errors.SoftTimeLimitExceeded`
is raised inside the job's thread, which may catch it to clean up. ``time_limit``:
the job's thread is abandoned and replaced, and the job is booked as failed with
:class:`~wurk_django.errors.HardTimeLimitExceeded` (retried or dead per its policy).

They are set like any job option: class attributes, ``job_options``,
``DEFAULT_JOB_OPTIONS`` or ``Job.set(...)`` for one push. The push refuses a bad
value naming it; a bad value in a payload a worker fetched (written by hand or by
another client) is logged and ignored, never a crash.
"""

from __future__ import annotations

import logging
import math
from typing import Any

logger = logging.getLogger("wurk_django.worker")

SOFT = "soft_time_limit"
HARD = "time_limit"
NAMES = (SOFT, HARD)


def problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the ``name`` limit, or None when it can (None means no limit)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        return f"job option {name!r} must be a finite number of seconds > 0 (or a timedelta), not {value!r}"
    return None


def normalize(job: dict) -> None:
    """At the push: timedeltas become seconds; a bad value raises ``ValueError`` naming it."""
    for name in NAMES:
        value = job.get(name)
        if value is None:
            continue
        if hasattr(value, "total_seconds"):
            value = job[name] = value.total_seconds()
        reason = problem(name, value)
        if reason:
            raise ValueError(reason)


def read(job: dict) -> tuple[float | None, float | None]:
    """(soft, hard) seconds of a fetched job; a bad value is logged and counts as no limit."""
    soft = job.get(SOFT)
    hard = job.get(HARD)
    if soft is not None and problem(SOFT, soft):
        logger.warning("job %s: ignoring %s", job.get("jid"), problem(SOFT, soft))
        soft = None
    if hard is not None and problem(HARD, hard):
        logger.warning("job %s: ignoring %s", job.get("jid"), problem(HARD, hard))
        hard = None
    return soft, hard
