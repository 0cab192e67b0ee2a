"""Celery's retry options on wurk's retry layer.

A Celery task retries only when it asks to: ``self.retry()``, or an exception listed
in ``autoretry_for``. Any other failure ends it (``FAILURE``). On wurk every failure
goes through the retry layer (the ``retry`` set, then the dead set), so a task's
job class answers the layer's ``retry_in`` hook with :func:`decide`: the delay before
the next attempt, or ``"kill"``, which sends the job to the dead set at once, where
the admin can retry it by hand. The payload's ``retry`` is the task's ``max_retries``.
"""

from __future__ import annotations

import random
from typing import Any

from .exceptions import Retry


def backoff(factor: int, retries: int, maximum: float | None, jitter: bool) -> float:
    """Celery's exponential backoff: ``factor * 2**retries`` seconds, at most ``maximum``,
    drawn uniformly below that with ``jitter``."""
    countdown = factor * (2 ** retries)
    if maximum is not None:
        countdown = min(countdown, maximum)
    if jitter:
        countdown = random.randrange(int(countdown) + 1)
    return max(0, countdown)


def decide(job_class: Any, retries: int, exc: BaseException) -> float | None:
    """Seconds until the next attempt after ``exc`` ended the run that had ``retries``
    retries before it, or ``None`` when the task does not retry (any more)."""
    if isinstance(exc, Retry):
        limit = exc.max_retries
        delay = exc.when if exc.when is not None else job_class.default_retry_delay
    elif autoretries(job_class, exc):
        options = job_class.retry_kwargs or {}
        limit = options.get("max_retries", job_class.max_retries)
        backoff_factor = job_class.retry_backoff
        if backoff_factor:
            delay = backoff(int(backoff_factor), retries, job_class.retry_backoff_max, job_class.retry_jitter)
        else:
            delay = options.get("countdown", job_class.default_retry_delay)
    else:
        return None
    if limit is not None and retries >= limit:
        return None
    return float(delay or 0)


def autoretries(job_class: Any, exc: BaseException) -> bool:
    wanted = job_class.autoretry_for or ()
    refused = job_class.dont_autoretry_for or ()
    return bool(wanted) and isinstance(exc, wanted) and not (refused and isinstance(exc, refused))


def retry_in(job_class: Any, count: int, exc: BaseException) -> float | str:
    """The retry layer's hook: ``count`` is the retries before the failed run."""
    delay = decide(job_class, count, exc)
    if delay is None:
        return "kill"
    # The layer takes a positive delay; 0 (Celery's "now") is the smallest one.
    return max(delay, 0.001)
