"""The server middleware that times each job and counts its outcome for statsd."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from .. import context
from ..errors import JobInterrupted, RetrySkip, Shutdown
from ..limiter.middleware import rate_limited
from . import PREFIX, client, emit, job_tags, setting_options
from .client import UDPClient

# A job cut short on purpose (an iterable job pausing, a worker shutting down)
# did nothing wrong: Pro counts it as a success.
_NOT_FAILURES = (JobInterrupted, RetrySkip, Shutdown)
COUNT = PREFIX + "jobs.count"
SUCCESS = PREFIX + "jobs.success"
FAILURE = PREFIX + "jobs.failure"
PERFORM = PREFIX + "jobs.perform"
PERFORM_DIST = PREFIX + "jobs.perform_dist"
#: A run the limiter ends as rate limited: neither a success nor a failure, and not timed
#: (the job's work did not happen); its ``jobs.rate_limited`` hangs off the limiter's signal.
RATE_LIMITED = PREFIX + "jobs.rate_limited"


# The default tags' line ends per (class, queue), for the client they were formatted for.
# A middleware instance lives for one job, so the cache lives here.
_tails: dict[tuple[str, str], str] = {}
_tails_of: UDPClient | None = None


def _default_tail(ours: UDPClient, klass: str, queue: str) -> str:
    global _tails, _tails_of
    if _tails_of is not ours:
        _tails, _tails_of = {}, ours
    tail = _tails.get((klass, queue))
    if tail is None:
        if len(_tails) >= 4096:  # a workload with endless class or queue names starts over
            _tails = {}
        tail = _tails[(klass, queue)] = ours.tail([f"worker:{klass}", f"queue:{queue}"])
    return tail


class StatsdMiddleware:
    """``jobs.count`` before the job, then ``jobs.success`` or ``jobs.failure`` and its
    duration as ``jobs.perform`` (gauge, ms) and ``jobs.perform_dist`` (distribution, ms);
    or nothing more for a run the limiter ends, counted as ``jobs.rate_limited`` (ENT-153)."""

    @staticmethod
    def applies(job: dict) -> bool:
        # With statsd off (the default) a job skips this layer altogether.
        return client() is not None

    def __call__(self, instance: Any, job: dict, queue: str, call_next: Callable[[], Any]) -> Any:
        target = client()
        if target is None:
            return call_next()
        klass = str(job.get("wrapped") or job.get("class"))
        # Our own client aggregates a job's metrics in two calls; any other client gets
        # them one by one through emit().
        ours = target if type(target) is UDPClient else None
        tail = ""
        tags: list[str] = []
        rate: float | None = None
        if ours is not None and "dd_rate" not in job and setting_options() is None:
            tail = _default_tail(ours, klass, queue)  # the common case: cached per class and queue
            ours.add_count(COUNT, tail)
        else:
            tags, rate = job_tags(klass, job, queue)
            if ours is None:
                emit("increment", "jobs.count", 1, tags, rate, to=target)
            elif rate is not None and rate < 1 and random.random() >= rate:
                ours = target = None  # sampled out: this job sends nothing (the rate scales the rest up)
            else:
                tail = ours.tail(tags, rate)
                ours.add_count(COUNT, tail)
        started = time.monotonic()
        outcome = FAILURE
        try:
            result = call_next()
            outcome = SUCCESS
            return result
        except _NOT_FAILURES:
            outcome = SUCCESS
            raise
        except Exception as exc:
            if rate_limited(exc, job, context.current().config):  # the worker's own config
                outcome = RATE_LIMITED
            raise
        finally:
            elapsed_ms = round((time.monotonic() - started) * 1000, 3)
            if outcome == RATE_LIMITED:
                pass  # jobs.rate_limited is sent on the limiter's signal (install.py), not here
            elif ours is not None:
                ours.add_timing(outcome, PERFORM, PERFORM_DIST, tail, elapsed_ms)
            elif target is not None:
                name = outcome[len(PREFIX):]
                emit("increment", name, 1, tags, rate, to=target)
                emit("gauge", "jobs.perform", elapsed_ms, tags, rate, to=target)
                emit("distribution", "jobs.perform_dist", elapsed_ms, tags, rate, to=target)
