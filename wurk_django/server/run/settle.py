"""Settling a run: the one place that books, logs, counts, signals and acknowledges a job.

:func:`settle` is called once per run, by whichever party ended it (the run's
phase decides, :mod:`.run`): the processor thread when the job returned, the
watchdog when it abandoned the thread (a hard time limit, a revoke's grace). In
order, it

1. tells the job observers how the run ended (:mod:`.observers`, before booking);
2. books the outcome: a revoked run goes to the dead set naming who stopped it, a
   paused one is pushed again, a failure goes to the retry layer (retried, dead or
   discarded); a Redis outage meanwhile makes it ``GIVEN_BACK``;
3. writes the job log's end line (``done``, ``fail``, ``rescheduled``, ``requeued``),
   sends ``job_succeeded``;
4. counts it (``stat:processed``/``stat:failed`` through the worker state, and the
   job metrics);
5. tells the *settled hooks* the final outcome, exactly once per run
   (:func:`~.observers.on_settled`; no built-in feature registers one: the results
   feature writes a record from the observer's end and its death handler);
6. acknowledges the job, or gives it back to its queue when its outcome could not
   be recorded; never when a hard shutdown requeued it already;
7. frees the slot its queue's limit gave it (``QUEUE_LIMITS``, issue 47 item 4),
   whatever the outcome: the run is over, and a job that runs again takes a slot again.

Everything runs with the run's job context (and the run) current, whatever thread
settles it, so features read the job's own config and Redis.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

import redis as redis_lib

from ... import context, payload, signals
from ...client.push import Client
from ...errors import BookingFailed, Shutdown
from ...outcome import ACKNOWLEDGED, Outcome
from ...queue_limits.caps import release as release_slot
from ...reporting import report
from ...revocation import revoked_error
from .. import death, invalid
from ..retry import error_class_name, error_message
from . import observers
from . import run as runs
from .run import Run, StopRequest

if TYPE_CHECKING:
    import threading

    from .manager import Manager

logger = logging.getLogger("wurk_django.worker")

# Redis unreachable: the outcome of a job waits for it to come back.
TRANSIENT = (redis_lib.ConnectionError, redis_lib.TimeoutError)


class GiveBacks:
    """One thread's give-backs in a row (they wait longer each time), and whether the
    last burial was refused because Redis is full."""

    __slots__ = ("count", "full")

    def __init__(self) -> None:
        self.count = 0
        self.full = False


def settle(run: Run, outcome: Outcome, error: BaseException | None = None, *, requeued: bool = False,
           current: bool = False) -> Outcome | None:
    """Book, log, count, signal and acknowledge ``run``, which ended as ``outcome``
    (with ``error`` for a failure). Returns the final outcome, or ``None`` when the run
    was settled already (the call changes nothing). ``requeued``: a hard shutdown put
    the job back already, so it is never acknowledged. ``current``: the caller (the
    job's own thread) has the run and its context current already."""
    if not run.claim():
        logger.info("job %s was settled already; a second outcome (%s) is dropped", run.jid, outcome.value)
        return None
    ctx = run.ctx
    ctx.outcome, ctx.error = outcome, error
    token = run_token = None
    if not current:
        token = context.enter(ctx) if context.running() is not ctx else None
        run_token = runs.enter(run) if runs.current() is not run else None
    try:
        return _settle(run, outcome, error, requeued)
    except BaseException:
        # A fault of the settlement itself: the caller deals with the job (gives it back or
        # buries it); the thread must not stay listed as busy with it.
        if not run.counted:
            run.manager.state.end(run.tid, True)
        raise
    finally:
        if run_token is not None:
            runs.leave(run_token)
        if token is not None:
            context.leave(token)


def _settle(run: Run, outcome: Outcome, error: BaseException | None, requeued: bool) -> Outcome:
    ctx, manager = run.ctx, run.manager
    if run.ends:
        elapsed_ms = (time.monotonic_ns() - run.started) / 1e6
        for end in run.ends:
            try:
                end(outcome, error, elapsed_ms)
            except Exception as exc:  # an observer never stops a job
                report(exc, {"context": "job observer", "jid": run.jid}, ctx.config)
    revoked = run.revoked if run.stops else None  # no stop asked: no property call per job
    if revoked is not None and outcome is not Outcome.INTERRUPTED:
        # Stopped by a revoke, however the run ended after the soft stop: the dead set, naming who.
        outcome = revoked_outcome(ctx, revoked)
    if outcome is Outcome.PAUSED:
        outcome, error = _repush(ctx, error)
    if outcome is Outcome.FAILED:
        outcome, error = _book(run, error)
    elif error is not None and outcome is not Outcome.SUCCEEDED:
        # A feature ended the job over an error of its own (an argument that cannot be decrypted).
        failed(ctx.job, error, ctx.config)
    ctx.outcome, ctx.error = outcome, error
    joblog, log = manager.joblog, run.log
    succeeded = outcome is Outcome.SUCCEEDED
    if succeeded:
        joblog.done(log, run.started)
        if signals.job_succeeded.receivers:  # its elapsed time is worked out only for a listener
            signals.send(signals.job_succeeded, ctx.job_class, job=ctx.job,
                         elapsed=(time.monotonic_ns() - run.started) / 1e9)
    elif outcome is Outcome.INTERRUPTED:
        joblog.requeued(log, run.started)
    elif outcome is Outcome.RESCHEDULED or outcome is Outcome.PAUSED:
        joblog.rescheduled(log, run.started)  # pushed again for later: it did not fail
    else:
        joblog.fail(log, run.started)
    manager.state.end(run.tid, not succeeded)
    run.counted = True
    # A job that paused did nothing wrong: its time counts like a success (CORE-210); a
    # shutdown cut it short, and a death is a death, which count as failures. A rate-limited
    # run did none of the job's work: neither, as Sidekiq Enterprise counts it (issue 28 item 9).
    if outcome is not Outcome.RESCHEDULED:
        manager.metrics.record(log["class"], (time.monotonic_ns() - run.started) / 1e6,
                               error is not None or outcome is Outcome.INTERRUPTED or outcome is Outcome.DEAD)
    if observers.settled_hooks:
        observers.settled(ctx, outcome, error)
    try:
        if requeued:
            return outcome  # hard shutdown requeued it already: never ACK it (RUN-803)
        # Compared by identity first: an Enum's hash (the set lookup) is Python code.
        if succeeded or outcome in ACKNOWLEDGED:
            if run.give_backs is not None:
                run.give_backs.count = 0
            ctx.unit.acknowledge()
        elif outcome is not Outcome.INTERRUPTED:
            give_back(ctx.unit, run.give_backs or GiveBacks(), manager.stop_flag)
        return outcome
    finally:
        # A unit of a capped queue holds a slot (None otherwise: one attribute read).
        if getattr(ctx.unit, "cap", None) is not None:
            release_slot(ctx.unit)


def _repush(ctx: Any, error: BaseException | None) -> tuple[Outcome, BaseException | None]:
    """The job asked to resume later: push it again through the normal client, so
    middleware runs and it gets a new ``enqueued_at`` (CORE-117). ``PAUSED`` stays the
    outcome once it is pushed."""
    try:
        Client(config=ctx.config).push(payload.loads(ctx.raw))
    except Shutdown:
        return Outcome.INTERRUPTED, error
    except Exception as exc:  # could not push it: a failure like any other, booked from the payload
        ctx.job_class = None
        return Outcome.FAILED, exc
    return Outcome.PAUSED, error


def _book(run: Run, exc: BaseException | None) -> tuple[Outcome, BaseException | None]:
    """Book ``exc`` with the retry layer: retried, dead or discarded; a shutdown in the
    middle leaves the job to the requeue; Redis down gives it back (CORE-113); a booking
    that fails for this payload buries it with both errors instead of looping."""
    ctx = run.ctx
    job, config = ctx.job, ctx.config
    assert exc is not None
    try:
        outcome = run.manager.retrier.book(ctx.job_class, ctx.raw, ctx.queue, exc)
    except Shutdown:
        return Outcome.INTERRUPTED, exc
    except BookingFailed as booking:
        failed(job, exc, config)
        return _bury_or_give_back(run, booking, f"{job.get('class')}: {booking}"), exc
    except Exception as internal:
        report(internal, {"context": "Internal exception!", "job": job}, config)
        if isinstance(internal, TRANSIENT):
            return Outcome.GIVEN_BACK, exc
        reason = (f"could not book the failure of {job.get('class')} "
                  f"({error_class_name(exc)}: {error_message(exc)}): "
                  f"{error_class_name(internal)}: {error_message(internal)}")
        return _bury_or_give_back(run, internal, reason), exc
    if outcome is not Outcome.INTERRUPTED:
        failed(job, exc, config)
    return outcome, exc


def _bury_or_give_back(run: Run, exc: BaseException, reason: str) -> Outcome:
    ctx = run.ctx
    return Outcome.DEAD if bury(ctx, ctx.raw, exc, reason, ctx.queue, run.give_backs) else Outcome.GIVEN_BACK


def failed(job: dict, exc: BaseException, config: Any) -> None:
    """A failed attempt: reported to the error handlers, and ``job_failed`` sent."""
    report(exc, {"context": "Job raised exception", "job": job, "jid": job.get("jid")}, config)
    signals.send(signals.job_failed, job.get("class"), job=job, exception=exc)


# -- revoked jobs ---------------------------------------------------------------------


def bury_revoked(ctx: Any, stop: StopRequest) -> None:
    """The dead set for a revoked job, its error naming who stopped it and when."""
    exc = revoked_error(stop.by, stop.at)
    logger.warning("job %s (%s): %s; moved to the dead set", ctx.job.get("jid"), ctx.job.get("class"), exc)
    death.die_as_fetched(ctx, exc, reason=death.MANUAL, error_class=error_class_name(exc),
                         error_message=error_message(exc), failed_at=ctx.config.wire_format.now(),
                         revoked_by=stop.by)


def revoked_outcome(ctx: Any, stop: StopRequest) -> Outcome:
    try:
        bury_revoked(ctx, stop)
    except Shutdown:
        return Outcome.INTERRUPTED
    except Exception as exc:  # not recorded: back to its queue; the revoked marker stops it there
        report(exc, {"context": "recording a revoked job", "jid": ctx.job.get("jid")}, ctx.config)
        return Outcome.GIVEN_BACK
    return Outcome.DEAD


def skip_revoked(ctx: Any, stop: StopRequest, pacing: GiveBacks, stop_flag: threading.Event) -> None:
    """A job revoked before it started (it was in flight when the revoke looked): the
    dead set without running it, then acknowledged."""
    outcome = revoked_outcome(ctx, stop)
    if outcome is Outcome.DEAD:
        ctx.outcome = outcome
        observers.settled(ctx, outcome, revoked_error(stop.by, stop.at))
        ctx.unit.acknowledge()
    else:
        give_back(ctx.unit, pacing, stop_flag)
    release_slot(ctx.unit)


# -- jobs that cannot run, and giving jobs back ------------------------------------------


def end_unrunnable(manager: Manager, unit: Any, exc: BaseException, reason: str, pacing: GiveBacks) -> None:
    """The dead set for a job that cannot run (bytes that do not parse, a fault of the
    worker while handling it); if Redis cannot take it, give it back."""
    if bury(manager, unit.job, exc, reason, unit.queue, pacing):
        unit.acknowledge()
    else:
        give_back(unit, pacing, manager.stop_flag)
    release_slot(unit)


def bury(where: Any, raw: bytes, exc: BaseException, reason: str, queue: str, pacing: GiveBacks | None) -> bool:
    """True once ``raw`` is in the dead set with ``reason``; ``where`` gives the config
    and the Redis client (a job context, or the manager)."""
    config = where.config
    redis = where.redis if not callable(where.redis) else where.redis()
    try:
        invalid.bury(raw, exc, reason=reason, queue=queue, config=config, redis=redis)
        return True
    except Exception as bury_exc:
        if pacing is not None:
            pacing.full = isinstance(bury_exc, redis_lib.OutOfMemoryError)
        report(bury_exc, {"context": "could not move a job that cannot run to the dead set"}, config)
        return False


def give_back(unit: Any, pacing: GiveBacks, stop_flag: threading.Event) -> None:
    """The outcome could not be recorded (Redis down mid-job): put the job back on
    its queue to run again, waiting for Redis as long as this worker is running.
    If the worker stops first, the job stays in the private list for the reaper.

    Give-backs in a row wait longer each time (up to 5 s), so a job whose
    outcome can never be recorded cannot spin a thread in a tight loop."""
    if pacing.full and hasattr(unit, "leave"):
        # Redis is full: the failure could not be recorded, and a job put back now would
        # be fetched and fail again at once, ahead of the jobs whose runs free memory.
        pacing.full = False
        unit.leave()
        logger.warning("job %s could not be recorded: Redis is at its memory limit; it waits in this "
                       "worker's private list and goes back to queue %s when Redis has room",
                       unit.jid, unit.queue)
        return
    pacing.count += 1
    if pacing.count > 1:
        stop_flag.wait(min(0.1 * 2 ** pacing.count, 5.0))
    delay = 0.5
    while True:
        try:
            unit.requeue()
            logger.warning("job %s went back to queue %s after an internal error", unit.jid, unit.queue)
            return
        except Exception as exc:
            if isinstance(exc, redis_lib.OutOfMemoryError) and hasattr(unit, "leave"):
                # A full Redis refuses the move back too. Waiting here would stop this
                # thread from draining the queue, which is what frees memory.
                unit.leave()
                logger.warning("job %s could not go back to queue %s: Redis is at its memory limit; it waits "
                               "in this worker's private list and goes back when Redis has room",
                               unit.jid, unit.queue)
                return
            if stop_flag.is_set():
                logger.warning("could not requeue job %s (%s); the reaper will recover it", unit.jid, exc)
                return
        time.sleep(delay)
        delay = min(delay * 2, 5.0)
