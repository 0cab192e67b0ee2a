"""The job observer that counts and times each job for statsd.

An observer, not a middleware (see :mod:`wurk_django.server.run.observers`): it
wraps nothing, so a job pays two short calls for its metrics.
"""

from __future__ import annotations

import random
from typing import Any

from ..outcome import Outcome
from . import PREFIX, client, emit, job_tags, setting_options
from .client import JobTally, UDPClient

COUNT = PREFIX + "jobs.count"
SUCCESS = PREFIX + "jobs.success"
FAILURE = PREFIX + "jobs.failure"
PERFORM = PREFIX + "jobs.perform"
PERFORM_DIST = PREFIX + "jobs.perform_dist"
NAMES = (COUNT, SUCCESS, FAILURE, PERFORM, PERFORM_DIST)

# The default tag set's ending per (class, queue), for the client that made it. An
# ending holds its tag set's tally and is the same object for every job of that pair.
_ends: dict[tuple[str, str], _TallyEnd] = {}
_ends_of: UDPClient | None = None


def _default_end(ours: UDPClient, klass: str, queue: str) -> _TallyEnd:
    global _ends, _ends_of
    if _ends_of is not ours:
        _ends, _ends_of = {}, ours
    end = _ends.get((klass, queue))
    if end is None:
        if len(_ends) >= 4096:  # a workload with endless class or queue names starts over
            _ends = {}
        tally = ours.job_tally(NAMES, ours.tail([f"worker:{klass}", f"queue:{queue}"]))
        end = _ends[(klass, queue)] = _TallyEnd(tally)
    return end


def observe(job: dict, queue: str) -> Any:
    """``jobs.count`` as the job starts; then, by the returned ending, ``jobs.success`` or
    ``jobs.failure`` and the duration as ``jobs.perform`` (gauge, ms) and
    ``jobs.perform_dist`` (distribution, ms). ``None`` while statsd is off."""
    target = client()
    if target is None:
        return None
    klass = job.get("wrapped") or job.get("class")
    if type(klass) is not str:
        klass = str(klass)
    if type(target) is UDPClient:
        # Our own client tallies a job's metrics: two updates a job.
        if "dd_rate" not in job and setting_options() is None:
            end = _default_end(target, klass, queue)  # the common case: cached per class and queue
        else:
            tags, rate = job_tags(klass, job, queue)
            if rate is not None and rate < 1 and random.random() >= rate:
                return None  # sampled out: this job sends nothing (the rate scales the rest up)
            end = _TallyEnd(target.job_tally(NAMES, target.tail(tags, rate)))
        end.tally.started()
        return end
    # Any other client gets the metrics one by one through emit().
    tags, rate = job_tags(klass, job, queue)
    emit("increment", "jobs.count", 1, tags, rate, to=target)
    return _EmitEnd(target, tags, rate)


def _succeeded(outcome: Any) -> bool:
    # Runs cut short on purpose did nothing wrong: Pro counts them as successes (an iterable
    # job pausing, a worker shutting down). A run the limiter ends as rate limited is neither
    # a success nor a failure, and not timed (the job's work did not happen): its
    # jobs.rate_limited hangs off the limiter's signal (install.py). Compared by identity:
    # an enum's hash is a Python-level call.
    return outcome is Outcome.SUCCEEDED or outcome is Outcome.PAUSED or outcome is Outcome.INTERRUPTED


class _TallyEnd:
    __slots__ = ("tally",)

    def __init__(self, tally: JobTally) -> None:
        self.tally = tally

    def __call__(self, outcome: Any, error: BaseException | None, elapsed_ms: float) -> None:
        if outcome is not Outcome.RESCHEDULED:
            self.tally.finished(_succeeded(outcome), elapsed_ms)


class _EmitEnd:
    __slots__ = ("target", "tags", "rate")

    def __init__(self, target: Any, tags: list[str], rate: float | None) -> None:
        self.target, self.tags, self.rate = target, tags, rate

    def __call__(self, outcome: Any, error: BaseException | None, elapsed_ms: float) -> None:
        if outcome is Outcome.RESCHEDULED:
            return
        name = "jobs.success" if _succeeded(outcome) else "jobs.failure"
        elapsed_ms = round(elapsed_ms, 3)  # milliseconds to the microsecond, as the tallies send it
        emit("increment", name, 1, self.tags, self.rate, to=self.target)
        emit("gauge", "jobs.perform", elapsed_ms, self.tags, self.rate, to=self.target)
        emit("distribution", "jobs.perform_dist", elapsed_ms, self.tags, self.rate, to=self.target)
