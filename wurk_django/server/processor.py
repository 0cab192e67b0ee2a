"""Processor: one thread that fetches a job, runs it and acknowledges it (CORE-110..117, RUN-122).

Layers around a job, outer to inner: global retry scope -> job log and busy
state -> database guard -> resolve the class -> local retry scope -> server
middleware -> ``perform``. The job is acknowledged on success and when the
retry layer booked the failure; never when it was interrupted by shutdown.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import redis as redis_lib

from .. import asyncrun, context, payload, registry, signals
from ..client import Client
from ..errors import BookingFailed, InvalidJob, JobInterrupted, RetryHandled, RetrySkip, Shutdown
from ..reporting import report
from . import database, invalid
from .retry import error_class_name, error_message
from .state import thread_id
from .threads import spawn

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
        self.stop_flag: threading.Event = manager.stop_flag
        self.done = False
        self.killed = False  # set at hard shutdown: the job was requeued, never ACK it
        self.unit: Any = None
        self.thread: threading.Thread | None = None
        self.tid = ""
        self._interrupted = False
        self._give_backs = 0  # give-backs since this thread last acknowledged a job

    def start(self) -> None:
        self.thread = spawn(f"{self.manager.name}/processor", self.run)

    def terminate(self) -> None:
        self.done = True

    def run(self) -> None:
        self.tid = thread_id()
        try:
            while not self.done:
                self.process_one()
        except Shutdown:
            pass
        finally:
            try:
                self.fetcher.flush_acks()  # before the manager may close the pool (RUN-122)
            except Exception as exc:
                report(exc, {"context": "flushing ACKs at processor exit"}, self.config)
            self.fetcher.release_thread_connection()
            try:
                database.close_thread_connections()
                asyncrun.close()
            finally:
                self.manager.processor_exited(self)

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
            unit.requeue()
            return
        self.unit = unit
        try:
            self.process(unit)
        except Exception as exc:
            # A fault of the runtime itself while handling this job: this thread must live on,
            # and the job must neither be lost nor run again at once.
            report(exc, {"context": "processing a job", "jid": unit.jid}, self.config)
            if self.killed:
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
        queue = unit.queue
        # The one object of this job: every feature reads the worker's config and Redis from it.
        token = context.enter(context.JobContext(self.config, self.redis, raw, unit, queue, job))
        try:
            self._process(unit, job, raw, queue)
        finally:
            context.leave(token)

    def _process(self, unit: Any, job: dict, raw: bytes, queue: str) -> None:
        ctx = self.joblog.context(job)
        started = time.monotonic_ns()
        ack = failed = skipped = self._interrupted = False
        self.state.begin(self.tid, queue, raw)
        try:
            self.joblog.start(ctx)
            try:
                job_class = self._run(job, raw, queue)
                ack = True
                self.joblog.done(ctx, started)
                signals.send(signals.job_succeeded, job_class, job=job, elapsed=(time.monotonic_ns() - started) / 1e9)
            except RetryHandled as handled:
                ack = failed = True
                self.joblog.fail(ctx, started)
                self._failed(job, handled.cause)
            except RetrySkip:
                ack = failed = skipped = True
                self.joblog.fail(ctx, started)
            except Shutdown:
                failed = True
                self._interrupted = True
                self.joblog.requeued(ctx, started)
            except BookingFailed as booking:
                failed = True
                self.joblog.fail(ctx, started)
                self._failed(job, booking.job_error)
                ack = self._bury(raw, booking, f"{job.get('class')}: {booking}", queue)
            except BaseException as exc:  # the global retry scope (CORE-120)
                failed = True
                self.joblog.fail(ctx, started)
                ack = self._global_retry(job, raw, queue, exc)
        finally:
            self.state.end(self.tid, failed)
            # CORE-210: an interrupted iterable job (RetrySkip) counts its time like a success.
            self.metrics.record(ctx["class"], (time.monotonic_ns() - started) / 1e6, failed and not skipped)
            if not self.killed:
                if ack:
                    self._give_backs = 0
                    unit.acknowledge()
                elif not self._interrupted:
                    self._give_back(unit)

    def _run(self, job: dict, raw: bytes, queue: str) -> Any:
        database.before_job()
        try:
            job_class = registry.resolve(job["class"], self.config)
            instance = job_class()
            instance.jid = job.get("jid")
            instance.bid = job.get("bid")
            instance.payload = job
            instance._stop_flag = self.stop_flag
            instance._config = self.config
            signals.send(signals.job_started, job_class, job=job)
            try:
                if len(self.chain):
                    self.chain.invoke((instance, job, queue), lambda: instance.run(job["args"]))
                else:
                    instance.run(job["args"])
            except (RetryHandled, RetrySkip, Shutdown):
                raise
            except JobInterrupted:
                # Re-push through the normal client: middleware runs, new enqueued_at (CORE-117).
                Client(config=self.config).push(payload.loads(raw))
                raise RetrySkip() from None
            except BaseException as exc:  # the local retry scope (CORE-120)
                self.retrier.local(job_class, raw, queue, exc)
            return job_class
        finally:
            database.after_job()

    def _give_back(self, unit: Any) -> None:
        """The outcome could not be recorded (Redis down mid-job): put the job back on
        its queue to run again, waiting for Redis as long as this worker is running.
        If the worker stops first, the job stays in the private list for the reaper.

        Give-backs in a row wait longer each time (up to 5 s), so a job whose
        outcome can never be recorded cannot spin this thread in a tight loop."""
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
                if self.stop_flag.is_set():
                    logger.warning("could not requeue job %s (%s); the reaper will recover it", unit.jid, exc)
                    return
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _global_retry(self, job: dict, raw: bytes, queue: str, exc: BaseException) -> bool:
        """Book a failure that escaped the local scope; True when the job may be ACKed."""
        try:
            self.retrier.global_(raw, queue, exc)
        except RetryHandled:
            self._failed(job, exc)
            return True
        except Shutdown:
            return False
        except Exception as internal:
            report(internal, {"context": "Internal exception!", "job": job}, self.config)
            if isinstance(internal, TRANSIENT):
                return False  # Redis down while booking: leave the job un-ACKed (CORE-113)
            # Booking itself failed for this payload: running it again would fail the same
            # way, so it ends in the dead set with both errors instead of looping.
            reason = (f"could not book the failure of {job.get('class')} "
                      f"({error_class_name(exc)}: {error_message(exc)}): "
                      f"{error_class_name(internal)}: {error_message(internal)}")
            return self._bury(raw, internal, reason, queue)
        return False

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
            report(bury_exc, {"context": "could not move a job that cannot run to the dead set"}, self.config)
            return False

