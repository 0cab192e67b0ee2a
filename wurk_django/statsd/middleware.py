"""The server middleware that times each job and counts its outcome for statsd."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import JobInterrupted, RetrySkip, Shutdown
from . import PREFIX, client, emit, job_tags
from .client import UDPClient

# A job cut short on purpose (an iterable job pausing, a worker shutting down)
# did nothing wrong: Pro counts it as a success.
_NOT_FAILURES = (JobInterrupted, RetrySkip, Shutdown)
COUNT = PREFIX + "jobs.count"
PERFORM = PREFIX + "jobs.perform"
PERFORM_DIST = PREFIX + "jobs.perform_dist"


class StatsdMiddleware:
    """``jobs.count`` before the job, then ``jobs.success`` or ``jobs.failure`` and its
    duration as ``jobs.perform`` (gauge, ms) and ``jobs.perform_dist`` (distribution, ms)."""

    @staticmethod
    def applies(job: dict) -> bool:
        # With statsd off (the default) a job skips this layer altogether.
        return client() is not None

    def __call__(self, instance: Any, job: dict, queue: str, call_next: Callable[[], Any]) -> Any:
        target = client()
        if target is None:
            return call_next()
        klass = str(job.get("wrapped") or job.get("class"))
        tags, rate = job_tags(klass, job, queue)
        # Our own client takes a job's metrics in one call (its tags formatted once);
        # any other client gets them one by one through emit().
        ours = target if type(target) is UDPClient else None
        if ours is not None:
            ours.report_many(((COUNT, "c", 1),), tags, rate)
        else:
            emit("increment", "jobs.count", 1, tags, rate, to=target)
        started = time.monotonic()
        outcome = "jobs.failure"
        try:
            result = call_next()
            outcome = "jobs.success"
            return result
        except _NOT_FAILURES:
            outcome = "jobs.success"
            raise
        finally:
            elapsed_ms = round((time.monotonic() - started) * 1000, 3)
            if ours is not None:
                ours.report_many(((PREFIX + outcome, "c", 1), (PERFORM, "g", elapsed_ms),
                                  (PERFORM_DIST, "d", elapsed_ms)), tags, rate)
            else:
                emit("increment", outcome, 1, tags, rate, to=target)
                emit("gauge", "jobs.perform", elapsed_ms, tags, rate, to=target)
                emit("distribution", "jobs.perform_dist", elapsed_ms, tags, rate, to=target)
