"""The worker's side of deadlines: a server middleware, in the place expired jobs are skipped.

A job fetched after its deadline never runs: it is buried as fetched (the dead set,
or a discard with ``deadline_action="discard"``), through the death path, so its
batch counts a death, its unique lock is released and its result record fails; the
run ends as ``DEAD`` or ``DISCARDED`` without a retry. A job fetched in time runs
with its deadline handed to the watchdog, which stops it there as at a hard time
limit (the same abandonment and the same settlement).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from .. import context, death
from ..errors import DeadlineExceeded, error_class_name
from ..outcome import Outcome
from . import KEY, discards, passed, shown

logger = logging.getLogger("wurk_django.worker")


class DeadlineMiddleware:
    """Server middleware: bury a job past its ``deadline``; watch one that starts in time."""

    applies_key = KEY  # applies() says no to a job without it

    @staticmethod
    def applies(job: dict) -> bool:
        return job.get(KEY) is not None

    def __call__(self, instance: Any, job: dict, queue: str, call_next: Callable[[], Any]) -> Any:
        deadline = job.get(KEY)
        now = time.time()
        if passed(deadline, now):
            bury(job, deadline, now)
            return None
        try:
            at = float(deadline)
        except (TypeError, ValueError):
            return call_next()  # unreadable (another client's): no deadline
        from ..server.run.run import current  # the worker's side only
        from ..server.stopping.watchdog import WATCHDOG

        run = current()
        if run is None:  # run outside a worker's thread (perform_inline): nothing to stop
            return call_next()
        WATCHDOG.watch_deadline(run, at)
        try:
            return call_next()
        finally:
            WATCHDOG.unwatch(run)


def bury(job: dict, deadline: Any, now: float) -> None:
    """End the running job, never started, for its passed deadline (dead or discarded)."""
    where = context.current()
    exc = DeadlineExceeded(f"the job was not started by its deadline {shown(float(deadline))} "
                           f"(fetched {now - float(deadline):.3f}s after it)")
    discard = discards(job)
    logger.warning("%s jid=%s was not started by its deadline %s: %s", job.get("class"), job.get("jid"),
                   shown(float(deadline)), "discarded" if discard else "moved to the dead set")
    fields = {"error_class": error_class_name(exc), "error_message": str(exc),
              "failed_at": where.config.wire_format.now()}
    if discard:
        fields["discarded_at"] = fields["failed_at"]
    death.die_as_fetched(where, exc, reason=death.DISCARDED if discard else death.DEADLINE, job=job, **fields)
    where.outcome, where.error = (Outcome.DISCARDED if discard else Outcome.DEAD), exc
