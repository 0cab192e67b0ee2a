"""The server middleware that times each job and counts its outcome for statsd."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from ..errors import JobInterrupted, RetrySkip, Shutdown
from . import client, emit, job_tags

# A job cut short on purpose (an iterable job pausing, a worker shutting down)
# did nothing wrong: Pro counts it as a success.
_NOT_FAILURES = (JobInterrupted, RetrySkip, Shutdown)


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
            emit("increment", outcome, 1, tags, rate, to=target)
            emit("gauge", "jobs.perform", elapsed_ms, tags, rate, to=target)
            emit("distribution", "jobs.perform_dist", elapsed_ms, tags, rate, to=target)
