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

from .. import asyncrun, payload, registry, signals
from ..client import Client
from ..dead import bury
from ..errors import InvalidJob, JobInterrupted, RetryHandled, RetrySkip, Shutdown
from ..reporting import report
from ..retry import error_class_name
from . import database
from .state import thread_id
from .threads import spawn

if TYPE_CHECKING:
    from .manager import Manager

logger = logging.getLogger("wurk_django.worker")


class Processor:
    def __init__(self, manager: Manager) -> None:
        self.manager = manager
        self.fetcher = manager.fetcher
        self.config = manager.config
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
        finally:
            self.unit = None

    def process(self, unit: Any) -> None:
        raw: bytes = unit.job
        try:
            job = payload.loads(raw)
            if not isinstance(job, dict):
                raise InvalidJob(f"payload is JSON but not an object: {raw[:200]!r}")
            if not isinstance(job.get("class"), str) or not isinstance(job.get("args"), list):
                raise InvalidJob("payload lacks a string 'class' or a list 'args'")
        except Exception as exc:  # any parse failure means the same: bury it
            self._bury_invalid(unit, exc)
            unit.acknowledge()
            return
        unit.jid = job.get("jid")
        queue = unit.queue
        expiry = job.get("expiry")
        if expiry is not None and _expired(expiry):
            # PRO-311: skipped, not failed and not retried; the ACK retires it.
            logger.info("skipping expired job %s jid=%s (expired at %s)", job.get("class"), unit.jid, expiry)
            signals.send(signals.job_expired, job.get("class"), job=job, queue=queue)
            self.state.end(self.tid, False)
            unit.acknowledge()
            return
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
                self.joblog.fail(ctx, started)
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
                    unit.acknowledge()
                elif not self._interrupted:
                    self._give_back(unit)

    def _run(self, job: dict, raw: bytes, queue: str) -> Any:
        database.before_job()
        try:
            job_class = registry.resolve(job["class"])
            instance = job_class()
            instance.jid = job.get("jid")
            instance.bid = job.get("bid")
            instance.payload = job
            instance._stop_flag = self.stop_flag
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
        If the worker stops first, the job stays in the private list for the reaper."""
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
            # Redis down while booking, for instance: leave the job un-ACKed (CORE-113).
            report(internal, {"context": "Internal exception!", "job": job}, self.config)
            return False
        return False

    def _failed(self, job: dict, exc: BaseException) -> None:
        report(exc, {"context": "Job raised exception", "job": job, "jid": job.get("jid")}, self.config)
        signals.send(signals.job_failed, job.get("class"), job=job, exception=exc)

    def _bury_invalid(self, unit: Any, exc: Exception) -> None:
        """A payload that cannot run goes to the dead set, with the reason, unchanged otherwise (CORE-110)."""
        raw: bytes = unit.job
        try:
            parsed = payload.loads(raw)
        except Exception:  # not JSON at all
            parsed = None
        now_ms = payload.now_ms()
        reason = str(exc) if isinstance(exc, InvalidJob) else f"Invalid JSON for job: {exc}"
        if isinstance(parsed, dict):
            entry = {**parsed, "queue": parsed.get("queue") or unit.queue}
            entry.setdefault("jid", payload.new_jid())  # so the dashboard can address the entry
        else:
            # Keep the original text as the only argument so nothing is lost.
            entry = {"class": "<unparseable>", "args": [raw.decode("utf-8", "replace")],
                     "queue": unit.queue, "jid": payload.new_jid()}
        entry.update({"error_class": error_class_name(exc if isinstance(exc, InvalidJob) else InvalidJob()),
                      "error_message": reason, "failed_at": now_ms})
        logger.error("%s (queue %s): moved to the dead set", reason, unit.queue)
        try:
            bury(self.manager.redis(), payload.dumps(entry), max_jobs=self.config.dead_max_jobs,
                 timeout=self.config.dead_timeout)
        except Exception as bury_exc:
            report(bury_exc, {"context": "could not move an invalid payload to the dead set"}, self.config)
            raise


def _expired(expiry: Any) -> bool:
    try:
        return time.time() > float(expiry)
    except (TypeError, ValueError):
        return False  # an unreadable expiry never stops a job from running
