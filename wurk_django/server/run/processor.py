"""Processor: one thread that fetches a job, runs it and settles it (CORE-110..117, RUN-122).

Per job: parse the bytes, build the job's :class:`~wurk_django.context.JobContext`
and make it current; run the job (database guard -> resolve the class -> server
middleware -> ``perform``), which ends in one :class:`~wurk_django.outcome.Outcome`
on the context; then :meth:`Processor._settle` acts on it (re-push, retry
booking, job log line, signals) and :meth:`Processor._finish` does the counters
and the acknowledgement. The job is acknowledged once its outcome is recorded in
Redis; never when it was interrupted by shutdown.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import redis as redis_lib

from ... import asyncrun, context, payload, registry, signals, time_limits
from ...client.push import Client
from ...context import JobContext
from ...errors import BookingFailed, InvalidJob, JobInterrupted, Shutdown
from ...outcome import ACKNOWLEDGED, Outcome
from ...reporting import report
from .. import death, invalid
from ..retry import error_class_name, error_message
from ..state import thread_id
from ..stopping import async_raise, revocations, watchdog
from ..threads import spawn
from . import database, joblevel, observers

if TYPE_CHECKING:
    from .manager import Manager

logger = logging.getLogger("wurk_django.worker")

# Redis unreachable: the outcome of a job waits for it to come back.
TRANSIENT = (redis_lib.ConnectionError, redis_lib.TimeoutError)


class Processor:
    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.fetcher = manager.fetcher
        self.config = manager.config
        self.redis = manager.redis()  # the server this worker fetches from: every job's features use it
        self.state = manager.state
        self.retrier = manager.retrier
        self.joblog = manager.joblog
        self.chain = manager.server_chain
        self.metrics = manager.metrics
        self.gate = manager.gate
        # Does this thread have its next job in hand (fetched ahead)? Then it keeps its pass.
        self.next_in_hand = getattr(self.fetcher, "next_in_hand", _nothing_in_hand)
        self.stop_flag: threading.Event = manager.stop_flag
        self.done = False
        self.killed = False  # set at hard shutdown: the job was requeued, never ACK it
        self.unit: Any = None
        self.thread: threading.Thread | None = None
        self.tid = ""
        self._give_backs = 0  # give-backs since this thread last acknowledged a job
        self._full = False  # the last burial failed because Redis is at its memory limit
        # Time limits and revoke (watchdog.py): the run in progress, guarded by phase_lock
        # against the watchdog, which raises into it or abandons it only while it runs.
        self.phase_lock = threading.Lock()
        self.running: JobContext | None = None
        self.raised = False  # the watchdog asked for an exception in this thread
        self.abandoned = False  # the watchdog gave this thread up: never book, ACK or replace
        self.revoked: tuple[str, float] | None = None  # (by, at) once the running job was revoked
        watchdog.PROCESSORS.add(self)

    def start(self) -> None:
        self.thread = spawn(f"{self.manager.name}/processor", self.run, self.config)

    def terminate(self) -> None:
        self.done = True

    def run(self) -> None:
        self.tid = thread_id()
        try:
            while not self.done:
                self.process_one()
        except (Shutdown, watchdog.HardStop):
            pass
        finally:
            self.gate.leave()
            try:
                self.fetcher.flush_acks()  # before the manager may close the pool (RUN-122)
            except Exception as exc:
                report(exc, {"context": "flushing ACKs at processor exit"}, self.config)
            self.fetcher.release_thread_connection()
            try:
                database.close_thread_connections()
                asyncrun.close()
            finally:
                if not self.abandoned:
                    self.manager.processor_exited(self)
                else:  # replaced already; whatever its job did after the hard stop was ignored
                    logger.info("an abandoned job thread (%s) ended; its job's result was ignored", self.tid)

    def process_one(self) -> None:
        try:
            unit = self.fetcher.retrieve_work()
        except Exception as exc:
            report(exc, {"context": "fetch"}, self.config)
            time.sleep(1)
            return
        self.state.last_fetch = time.monotonic()
        if unit is None:
            return
        if self.done or not self.state.admit():
            # Fetched after quiet began (or past --max-jobs): back to the fetch end, unrun (CORE-107).
            self._put_back(unit)
            return
        if self.gate.enabled and not self.gate.wide_open():
            self._handle_in_turn(unit)
        else:
            self._handle(unit)

    def _handle_in_turn(self, unit: Any) -> None:
        """``GIL_GATE`` while the gate limits: wait for this thread's turn among those running
        short jobs (run_gate.py), and keep the turn only while the next job is in hand."""
        self.unit = unit  # waiting, it holds the job: --burst and a hard stop must see it
        if database.holds_connection():
            self.gate.leave()  # its jobs wait on the database: they do not count
        else:
            self.gate.take()
        try:
            if self.done:  # quiet began while it waited
                if not self.killed:  # else the hard stop put it back already
                    self._put_back(unit)
                self.unit = None
                return
            self._handle(unit)
        finally:
            if not self.next_in_hand():
                self.gate.leave()  # another thread runs while this one fetches

    def _put_back(self, unit: Any) -> None:
        """Back to its queue, unrun. If Redis refuses, reliable fetch keeps the job in this
        process's private list, where the reaper finds it once the process is gone; the
        thread goes on either way."""
        try:
            unit.requeue()
        except redis_lib.RedisError as exc:
            report(exc, {"context": "handing back a job it will not run", "jid": unit.jid}, self.config)

    def _handle(self, unit: Any) -> None:
        self.unit = unit
        try:
            self.process(unit)
        except Exception as exc:
            # A fault of the runtime itself while handling this job: this thread must live on,
            # and the job must neither be lost nor run again at once.
            report(exc, {"context": "processing a job", "jid": unit.jid}, self.config)
            if self.killed or self.abandoned:
                pass  # hard shutdown requeued it already
            elif isinstance(exc, TRANSIENT):
                self._give_back(unit)
            else:
                self._end_unrunnable(unit, exc, f"the worker failed while handling this job: "
                                                f"{error_class_name(exc)}: {error_message(exc)}")
        finally:
            self.unit = None

    def process(self, unit: Any) -> None:
        raw: bytes = unit.job
        try:
            job = payload.parse_job(raw)
        except InvalidJob as exc:  # never run, never re-queued: the dead set, with the reason
            self._end_unrunnable(unit, exc, str(exc))
            return
        unit.jid = job.get("jid")
        # The one object of this job: every feature reads the worker's config and Redis from it.
        ctx = JobContext(self.config, self.redis, raw, unit, unit.queue, job)
        if revocations.jids and unit.jid in revocations.jids:
            # Revoked before it started (it was in flight when the revoke looked): never run.
            self._skip_revoked(ctx, *revocations.jids[unit.jid])
            return
        token = context.enter(ctx)
        level = job.get("log_level")
        previous_level = joblevel.enter(level) if level is not None else None
        try:
            log = self.joblog.context(job)
            started = time.monotonic_ns()
            self.state.begin(self.tid, ctx.queue, raw)
            try:
                watching = observers.active
                ends = self._observe_start(watching, job, ctx.queue) if watching else None
                self.joblog.start(log)
                self._run(ctx)
                if ends:  # an abandoned run too, when its thread comes back: it failed
                    self._observe_end(ends, ctx, started)
                if not self.abandoned:  # else the watchdog books and acknowledges it
                    self._settle(ctx, log, started)
            finally:
                self._finish(ctx, log, started)
        finally:
            if level is not None:
                joblevel.leave(previous_level)
            context.leave(token)

    def _observe_start(self, watching: tuple, job: dict, queue: str) -> list:
        ends = []
        for observer in watching:
            try:
                end = observer(job, queue)
            except Exception as exc:  # an observer never stops a job
                report(exc, {"context": "job observer", "jid": job.get("jid")}, self.config)
            else:
                if end is not None:
                    ends.append(end)
        return ends

    def _observe_end(self, ends: list, ctx: JobContext, started: int) -> None:
        elapsed_ms = (time.monotonic_ns() - started) / 1e6
        for end in ends:
            try:
                end(ctx.outcome, ctx.error, elapsed_ms)
            except Exception as exc:
                report(exc, {"context": "job observer", "jid": ctx.job.get("jid")}, self.config)

    def _run(self, ctx: JobContext) -> None:
        """Run the job through the server middleware; the run ends in ``ctx.outcome``."""
        job = ctx.job
        self.revoked = None
        self.running = ctx  # from here the watchdog may raise into this thread: inside the try below
        try:
            try:
                if job.get("soft_time_limit") is not None or job.get("time_limit") is not None:
                    soft, hard = time_limits.read(job)
                    if soft is not None or hard is not None:
                        watchdog.WATCHDOG.watch(self, ctx, soft, hard)
                database.before_job()
                job_class = ctx.job_class = registry.resolve(job["class"], self.config)
                instance = ctx.instance = job_class()
                instance.jid = job.get("jid")
                instance.bid = job.get("bid")
                instance.payload = job
                instance._stop_flag = self.stop_flag
                instance._config = self.config
                signals.send(signals.job_started, job_class, job=job)
                if len(self.chain):
                    self.chain.invoke((instance, job, ctx.queue), lambda: _perform(ctx))
                else:
                    _perform(ctx)
            finally:
                try:
                    database.after_job()
                finally:
                    # Out of the running phase: no stop can be asked for from now on, and one
                    # asked for and not yet raised is withdrawn. One raised before this lands
                    # in the handlers below, like the job's own failure.
                    with self.phase_lock:
                        self.running = None
                        if self.raised:
                            self.raised = False
                            async_raise.clear(threading.get_ident())
        except Shutdown:
            ctx.outcome = Outcome.INTERRUPTED
        except JobInterrupted:  # raised by a middleware rather than perform: the same request
            ctx.outcome = Outcome.PAUSED
        except BaseException as exc:  # the job's own failure, or one before it could start
            ctx.outcome = Outcome.FAILED
            ctx.error = exc
        else:
            if ctx.outcome is None:
                ctx.outcome = Outcome.SUCCEEDED

    def _settle(self, ctx: JobContext, log: dict, started: int) -> None:
        """Act on how the run ended: re-push, book the failure, the job log line and signals.
        The acknowledgement and the counters follow in :meth:`_finish`, whatever happens here."""
        if self.revoked is not None and ctx.outcome is not Outcome.INTERRUPTED:
            # Stopped by a revoke, however the run ended after the soft stop: the dead set, naming who.
            ctx.outcome = self._revoked_outcome(ctx, *self.revoked)
        outcome = ctx.outcome
        if outcome is Outcome.PAUSED:
            outcome = ctx.outcome = self._repush(ctx)
        if outcome is Outcome.FAILED:
            outcome = ctx.outcome = self._book(ctx)
        elif ctx.error is not None and outcome is not Outcome.SUCCEEDED:
            # A feature ended the job over an error of its own (an argument that cannot be decrypted).
            self._failed(ctx.job, ctx.error)
        if outcome is Outcome.SUCCEEDED:
            self.joblog.done(log, started)
            signals.send(signals.job_succeeded, ctx.job_class, job=ctx.job,
                         elapsed=(time.monotonic_ns() - started) / 1e9)
        elif outcome is Outcome.INTERRUPTED:
            self.joblog.requeued(log, started)
        elif outcome is Outcome.RESCHEDULED or outcome is Outcome.PAUSED:
            self.joblog.rescheduled(log, started)  # pushed again for later: it did not fail
        else:
            self.joblog.fail(log, started)

    def _finish(self, ctx: JobContext, log: dict, started: int) -> None:
        if self.abandoned:
            return  # the watchdog books it, counts it and acknowledges it
        outcome = ctx.outcome
        self.state.end(self.tid, outcome is not Outcome.SUCCEEDED)
        # A job that paused did nothing wrong: its time counts like a success (CORE-210); a
        # shutdown cut it short, and a death is a death, which count as failures. A rate-limited
        # run did none of the job's work: neither, as Sidekiq Enterprise counts it (issue 28 item 9).
        if outcome is not Outcome.RESCHEDULED:
            self.metrics.record(log["class"], (time.monotonic_ns() - started) / 1e6,
                                ctx.error is not None or outcome is Outcome.INTERRUPTED or outcome is Outcome.DEAD)
        if self.killed:
            return  # hard shutdown requeued it already: never ACK it (RUN-803)
        if outcome in ACKNOWLEDGED:
            self._give_backs = 0
            ctx.unit.acknowledge()
        elif outcome is not Outcome.INTERRUPTED:
            self._give_back(ctx.unit)

    def _repush(self, ctx: JobContext) -> Outcome:
        """The job asked to resume later: push it again through the normal client, so
        middleware runs and it gets a new ``enqueued_at`` (CORE-117). ``PAUSED`` stays the
        outcome once it is pushed."""
        try:
            Client(config=self.config).push(payload.loads(ctx.raw))
        except Shutdown:
            return Outcome.INTERRUPTED
        except Exception as exc:  # could not push it: a failure like any other, booked from the payload
            ctx.job_class = None
            ctx.error = exc
            return Outcome.FAILED
        return Outcome.PAUSED

    def _book(self, ctx: JobContext) -> Outcome:
        """Book ``ctx.error`` with the retry layer: retried, dead or discarded; a shutdown in
        the middle leaves the job to the requeue; Redis down gives it back (CORE-113); a
        booking that fails for this payload buries it with both errors instead of looping."""
        job, exc = ctx.job, ctx.error
        try:
            outcome = self.retrier.book(ctx.job_class, ctx.raw, ctx.queue, exc)
        except Shutdown:
            return Outcome.INTERRUPTED
        except BookingFailed as booking:
            self._failed(job, exc)
            return self._bury_or_give_back(ctx, booking, f"{job.get('class')}: {booking}")
        except Exception as internal:
            report(internal, {"context": "Internal exception!", "job": job}, self.config)
            if isinstance(internal, TRANSIENT):
                return Outcome.GIVEN_BACK
            reason = (f"could not book the failure of {job.get('class')} "
                      f"({error_class_name(exc)}: {error_message(exc)}): "
                      f"{error_class_name(internal)}: {error_message(internal)}")
            return self._bury_or_give_back(ctx, internal, reason)
        if outcome is not Outcome.INTERRUPTED:
            self._failed(job, exc)
        return outcome

    def _bury_or_give_back(self, ctx: JobContext, exc: BaseException, reason: str) -> Outcome:
        return Outcome.DEAD if self._bury(ctx.raw, exc, reason, ctx.queue) else Outcome.GIVEN_BACK

    def _give_back(self, unit: Any) -> None:
        """The outcome could not be recorded (Redis down mid-job): put the job back on
        its queue to run again, waiting for Redis as long as this worker is running.
        If the worker stops first, the job stays in the private list for the reaper.

        Give-backs in a row wait longer each time (up to 5 s), so a job whose
        outcome can never be recorded cannot spin this thread in a tight loop."""
        if self._full and hasattr(unit, "leave"):
            # Redis is full: the failure could not be recorded, and a job put back now would
            # be fetched and fail again at once, ahead of the jobs whose runs free memory.
            self._full = False
            unit.leave()
            logger.warning("job %s could not be recorded: Redis is at its memory limit; it waits in this "
                           "worker's private list and goes back to queue %s when Redis has room",
                           unit.jid, unit.queue)
            return
        self._give_backs += 1
        if self._give_backs > 1:
            self.stop_flag.wait(min(0.1 * 2 ** self._give_backs, 5.0))
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
                if self.stop_flag.is_set():
                    logger.warning("could not requeue job %s (%s); the reaper will recover it", unit.jid, exc)
                    return
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    def bury_revoked(self, ctx: JobContext, by: str, at: float) -> None:
        """The dead set for a revoked job, its error naming who stopped it and when."""
        exc = watchdog.revoked_error(by, at)
        logger.warning("job %s (%s): %s; moved to the dead set", ctx.job.get("jid"), ctx.job.get("class"), exc)
        death.die_as_fetched(ctx, exc, reason=death.MANUAL, error_class=error_class_name(exc),
                             error_message=error_message(exc), failed_at=self.config.wire_format.now(),
                             revoked_by=by)

    def _revoked_outcome(self, ctx: JobContext, by: str, at: float) -> Outcome:
        try:
            self.bury_revoked(ctx, by, at)
        except Shutdown:
            return Outcome.INTERRUPTED
        except Exception as exc:  # not recorded: back to its queue; the revoked marker stops it there
            report(exc, {"context": "recording a revoked job", "jid": ctx.job.get("jid")}, self.config)
            return Outcome.GIVEN_BACK
        return Outcome.DEAD

    def _skip_revoked(self, ctx: JobContext, by: str, at: float) -> None:
        if self._revoked_outcome(ctx, by, at) is Outcome.DEAD:
            ctx.unit.acknowledge()
        else:
            self._give_back(ctx.unit)

    def _failed(self, job: dict, exc: BaseException) -> None:
        report(exc, {"context": "Job raised exception", "job": job, "jid": job.get("jid")}, self.config)
        signals.send(signals.job_failed, job.get("class"), job=job, exception=exc)

    def _end_unrunnable(self, unit: Any, exc: BaseException, reason: str) -> None:
        """The dead set for a job that cannot run; if Redis cannot take it, give it back."""
        if self._bury(unit.job, exc, reason, unit.queue):
            unit.acknowledge()
        else:
            self._give_back(unit)

    def _bury(self, raw: bytes, exc: BaseException, reason: str, queue: str) -> bool:
        """True once ``raw`` is in the dead set with ``reason``."""
        try:
            invalid.bury(raw, exc, reason=reason, queue=queue, config=self.config, redis=self.redis)
            return True
        except Exception as bury_exc:
            self._full = isinstance(bury_exc, redis_lib.OutOfMemoryError)
            report(bury_exc, {"context": "could not move a job that cannot run to the dead set"}, self.config)
            return False


def _nothing_in_hand() -> bool:
    return False


def _perform(ctx: JobContext) -> None:
    """The innermost layer: ``perform``. A job that asks to resume later ends as ``PAUSED``
    here, so the middleware around it sees a run that returned, not an exception."""
    try:
        ctx.instance.run(ctx.job["args"], ctx.job.get("kwargs"))
    except JobInterrupted:
        ctx.outcome = Outcome.PAUSED
