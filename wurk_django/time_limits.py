"""Per-job time limits: the payload keys ``soft_time_limit`` and ``time_limit`` (issue 27 item 3).

Both are seconds (a number > 0 and at most :data:`MAX_SECONDS`, one day; a timedelta
is accepted where a job is pushed and stored as seconds). ``soft_time_limit``:
:class:`~wurk_django.errors.SoftTimeLimitExceeded` is raised inside the job's thread,
which may catch it to clean up. ``time_limit``: the job's thread is abandoned and
replaced, and the job is booked as failed with
:class:`~wurk_django.errors.HardTimeLimitExceeded` (retried or dead per its policy).

They are set like any job option: class attributes, ``job_options``,
``DEFAULT_JOB_OPTIONS`` or ``Job.set(...)`` for one push. The push refuses a bad
value naming it; a bad value in a payload a worker fetched (written by hand or by
another client) is logged, one line per run, and ignored, never a crash (issue 43
item 6).
"""

from __future__ import annotations

import logging
import math
from typing import Any

logger = logging.getLogger("wurk_django.worker")

SOFT = "soft_time_limit"
HARD = "time_limit"
NAMES = (SOFT, HARD)

#: The longest limit accepted, in seconds: one day. A job meant to run longer has no
#: use for a limit; a larger value is a mistake (a unit mix-up, ``1e308`` from another
#: client), and a deadline that far off cannot be slept on.
MAX_SECONDS = 86400


def _shown(value: Any) -> str:
    """``repr(value)``, cut short: a limit read from a payload may be any size."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return f"an integer of about {value.bit_length() * 0.30103:.0f} digits"
    return text if len(text) <= 40 else text[:37] + "..."


def problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the ``name`` limit, or None when it can (None means no limit)."""
    if value is None:
        return None
    # Compared as the int or float it is: math.isfinite() of a huge int raises OverflowError.
    if (isinstance(value, bool) or not isinstance(value, (int, float))
            or (isinstance(value, float) and not math.isfinite(value)) or value <= 0):
        return f"job option {name!r} must be a finite number of seconds > 0 (or a timedelta), not {_shown(value)}"
    if value > MAX_SECONDS:
        return (f"job option {name!r} is {_shown(value)} seconds, above the maximum of {MAX_SECONDS} "
                f"seconds (1 day)")
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


def seconds(value: Any) -> float | None:
    """``value`` as a float a deadline can be built from, or None when it is no usable
    limit (the watchdog's own guard: nothing it is handed can overflow a wait)."""
    return None if value is None or problem(HARD, value) else float(value)


def read(job: dict) -> tuple[float | None, float | None]:
    """(soft, hard) seconds of a fetched job; a bad value is ignored (no limit), and
    the run logs one warning line naming every value it ignored."""
    limits: list[float | None] = []
    reasons: list[str] = []
    for name in NAMES:
        value = job.get(name)
        reason = problem(name, value)
        if reason:
            reasons.append(reason)
            limits.append(None)
        else:
            limits.append(None if value is None else float(value))
    if reasons:
        logger.warning("job %s (%s) runs without its bad time limit%s: %s", job.get("jid"), job.get("class"),
                       "s" if len(reasons) > 1 else "", "; ".join(reasons))
    return limits[0], limits[1]
