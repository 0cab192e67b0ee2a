"""A task's ``rate_limit`` (``"10/m"``) on wurk's limiters (:mod:`wurk_django.limiter`).

Celery counts a rate per worker process; wurk's limiters are shared by every process
on the Redis, so ``"10/m"`` means at most 10 starts in any sliding minute across the
cluster (a window limiter named ``celery:<task name>``, seen on the admin's Limits
page). A call over the rate is not failed: the limiter middleware reschedules it one
to two slots of the rate later (6 to 12 s for ``"10/m"``), for as long as a backlog
needs, as Celery's worker holds it back.
"""

from __future__ import annotations

import functools
import random
import re
from typing import Any

#: Celery's units: seconds, minutes, hours.
UNITS = {"s": 1, "m": 60, "h": 3600}
_RATE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(?:/\s*([smh]))?\s*$")


def parse(rate: Any) -> tuple[int, int] | None:
    """``(count, seconds)`` of a Celery rate (``"10/m"``, ``"2/s"``, ``100`` per second), or
    ``None`` for no limit (``None``, ``0``). ``ValueError`` names a rate wurk cannot keep."""
    if rate is None:
        return None
    if isinstance(rate, bool):
        raise ValueError(f"rate_limit must be like '10/m', '2/s' or '100/h', not {rate!r}")
    match = _RATE.match(str(rate))
    if match is None:
        raise ValueError(f"rate_limit must be like '10/m', '2/s' or '100/h', not {rate!r}")
    count, unit = float(match.group(1)), match.group(2) or "s"
    if count == 0:
        return None
    period = UNITS[unit]
    if count != int(count):
        # A fractional rate ("0.5/s") is one call per so many seconds.
        period, count = round(period / count), 1
    return int(count), period


def limiter_for(task_name: str, rate: Any) -> Any:
    """The window limiter that keeps ``rate``, or ``None`` for no limit."""
    parsed = parse(rate)
    if parsed is None:
        return None
    from .. import limiter

    count, period = parsed
    # wait_timeout=0: a worker thread never sleeps for room; the job is rescheduled instead,
    # after about one slot of the rate (not the limiters' default of minutes), for as many
    # rounds as a backlog needs: Celery holds such calls back, it never fails them.
    return limiter.window(f"celery:{task_name}", count, period, wait_timeout=0, reschedule=RESCHEDULE_ROUNDS,
                          backoff=functools.partial(_next_slot, period / count))


#: Rounds a call may be held back before it goes to the dead set (a backlog of hours).
RESCHEDULE_ROUNDS = 100_000


def _next_slot(slot: float, _limiter: Any, _job: dict, _exc: BaseException) -> float:
    """Seconds until a held-back call tries again: one to two slots of the rate, at
    random, so a backlog spreads over the window instead of returning at once."""
    return max(slot * (1 + random.random()), 0.5)
