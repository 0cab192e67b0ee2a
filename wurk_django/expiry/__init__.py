"""Expiring jobs (PRO-310/311): a job pushed with ``expires_in`` that is still
queued after its ``expiry`` is skipped, not run, not failed and not retried.

The client stamps ``expiry`` (creation time + ``expires_in``), so a scheduled
job's delay counts too. The skip happens in a server middleware rather than
before the chain, so the features outside it see an expired job as a job that
ran and returned: its batch counts it as done, its unique lock is released.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from .. import signals

logger = logging.getLogger("wurk_django.worker")


def expired(expiry: Any, now: float | None = None) -> bool:
    """True when ``expiry`` (epoch seconds) has passed; an unreadable value never expires a job."""
    try:
        return (time.time() if now is None else now) > float(expiry)
    except (TypeError, ValueError):
        return False


class ExpiryMiddleware:
    """Server middleware: skip ``perform`` for a job whose ``expiry`` has passed."""

    applies_key = "expiry"  # applies() says no to a job without it

    @staticmethod
    def applies(job: dict) -> bool:
        return job.get("expiry") is not None

    def __call__(self, instance: Any, job: dict, queue: str, call_next: Callable[[], Any]) -> Any:
        expiry = job.get("expiry")
        if expiry is not None and expired(expiry):
            logger.info("skipping expired job %s jid=%s (expired at %s)", job.get("class"), job.get("jid"), expiry)
            signals.send(signals.job_expired, job.get("class"), job=job, queue=queue)
            return None
        return call_next()
