"""Processor: one thread that fetches a job, runs it and settles it (CORE-110..117, RUN-122).

Per job: parse the bytes, build the job's :class:`~wurk_django.context.JobContext`
and make it current, and the :class:`~.run.Run` around it; run the job (database
guard -> resolve the class -> server middleware -> ``perform``), which ends in one
:class:`~wurk_django.outcome.Outcome`; then, if the run is still this thread's
(it was not abandoned meanwhile), hand it to :func:`~.settle.settle`, the one code
that books, logs, counts, signals and acknowledges. The job is acknowledged once
its outcome is recorded in Redis; never when it was interrupted by shutdown.
"""

from __future__ import annotations

import logging
import threading
import time
from functools import partial
from typing import TYPE_CHECKING, Any

import redis as redis_lib

from ... import asyncrun, context, payload, registry, signals, time_limits
from ...context import JobContext
from ...errors import InvalidJob, JobInterrupted, Shutdown
from ...outcome import Outcome
from ...queue_limits.caps import release as release_slot
from ...reporting import report
from ..retry import error_class_name, error_message
from ..state import thread_id
from ..stopping import revocations, watchdog
from ..threads import spawn
from . import database, joblevel, observers
from . import run as runs
from .run import HardStop, Run, StopRequest
from .settle import GiveBacks, end_unrunnable, give_back, settle, skip_revoked

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
        self.give_backs = GiveBacks()  # this thread's give-backs in a row (they wait longer each time)
        # The run in progress, for revokes and the hard shutdown; its own lock guards its phase.
        self.current: Run | None = None
        self._run_lock = threading.Lock()  # every run of this thread guards its phase with it
        self.abandoned = False  # its run was abandoned (a hard stop): never book, ACK or replace

    def start(self) -> None:
        self.thread = spawn(f"{self.manager.name}/processor", self.run, self.config)

    def terminate(self) -> None:
        self.done = True

    def run(self) -> None:
        self.tid = thread_id()
        # Set here too: start() assigns it only once spawn() returns, and by then this thread
        # may be running a job whose run must name it (the hard stop raises into it, the
        # manager finds this processor by it).
        self.thread = threading.current_thread()
        try:
            while not self.done:
                self.process_one()
        except (Shutdown, HardStop):
            pass
        finally:
            if not self.abandoned:  # else its slot and connection were taken back already
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
                else:  # replaced already; whatever its job did after the hard stop was dropped
                    logger.info("an abandoned job thread (%s) ended; its job's late outcome was dropped", self.tid)

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
        self._handle(unit)

    def _put_back(self, unit: Any) -> None:
        """Back to its queue, unrun. If Redis refuses, reliable fetch keeps the job in this
        process's private list, where the reaper finds it once the process is gone; the
        thread goes on either way."""
        try:
            unit.requeue()
        except redis_lib.RedisError as exc:
            report(exc, {"context": "handing back a job it will not run", "jid": unit.jid}, self.config)
        # Not run here, whether back in its queue or left for the reaper: its queue's slot
        # goes (queue limits; a release Redis refuses is sent again later).
        release_slot(unit)

    def _handle(self, unit: Any) -> None:
        self.unit = unit
        try:
            self.process(unit)
        except Exception as exc:
            # A fault of the runtime itself while handling this job: this thread must live on,
            # and the job must neither be lost nor run again at once.
            report(exc, {"context": "processing a job", "jid": unit.jid}, self.config)
            if self.killed or self.abandoned:
                pass  # hard shutdown requeued it already, or the abandonment settled it
            elif isinstance(exc, TRANSIENT):
                give_back(unit, self.give_backs, self.stop_flag)
                release_slot(unit)
            else:
                end_unrunnable(self.manager, unit, exc, f"the worker failed while handling this job: "
                                                        f"{error_class_name(exc)}: {error_message(exc)}",
                               self.give_backs)
        finally:
            self.unit = None

    def process(self, unit: Any) -> None:
        raw: bytes = unit.job
        try:
            job = payload.parse_job(raw)
        except InvalidJob as exc:  # never run, never re-queued: the dead set, with the reason
            end_unrunnable(self.manager, unit, exc, str(exc), self.give_backs)
            return
        unit.jid = job.get("jid")
        # The one object of this job: every feature reads the worker's config and Redis from it.
        ctx = JobContext(self.config, self.redis, raw, unit, unit.queue, job)
        if revocations.jids and unit.jid in revocations.jids:
            # Revoked before it started (it was in flight when the revoke looked): never run.
            by, at = revocations.jids[unit.jid]
            skip_revoked(ctx, StopRequest("revoke", by, at), self.give_backs, self.stop_flag)
            return
        token = context.enter(ctx)
        level = job.get("log_level")
        previous_level = joblevel.enter(level) if level is not None else None
        try:
            run = Run(ctx, self.manager, self.thread, self.tid, self.joblog.context(job), self.give_backs,
                      self._run_lock)
            run_token = runs.RUN.set(run)
            try:
                self.state.begin(self.tid, ctx.queue, raw)
                watching = observers.active
                if watching:
                    run.ends = self._observe_start(watching, job, ctx.queue)
                self.joblog.start(run.log)
                outcome, error, mine = self._run(run)
                if mine:
                    settle(run, outcome, error, requeued=self.killed, current=True)
                else:
                    # Abandoned meanwhile: the watchdog's settlement stands, this one is dropped.
                    self.abandoned = self.done = True
                    logger.info("job %s came back after its thread was abandoned; its late outcome (%s) "
                                "is dropped", run.jid, outcome.value)
            finally:
                runs.RUN.reset(run_token)
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

    def _run(self, run: Run) -> tuple[Outcome, BaseException | None, bool]:
        """Run the job through the server middleware: how it ended, its error, and whether
        the run is still this thread's to settle (False once it was abandoned)."""
        ctx = run.ctx
        job = ctx.job
        watched = False
        mine: bool | None = None
        self.current = run  # from here a stop may be raised into this thread: inside the try below
        error: BaseException | None = None
        try:
            try:
                if "soft_time_limit" in job or "time_limit" in job:  # read() takes a None for none
                    soft, hard = time_limits.read(job)
                    if soft is not None or hard is not None:
                        watchdog.WATCHDOG.watch(run, soft, hard)
                        watched = True
                database.before_job()
                job_class = ctx.job_class = registry.resolve(job["class"], self.config)
                instance = ctx.instance = job_class()
                instance.jid = job.get("jid")
                instance.bid = job.get("bid")
                instance.payload = job
                instance._stop_flag = self.stop_flag
                instance._config = self.config
                if signals.job_started.receivers:
                    signals.send(signals.job_started, job_class, job=job)
                # An empty chain calls _perform straight away (Chain.invoke).
                self.chain.invoke((instance, job, ctx.queue), partial(_perform, ctx))
            finally:
                try:
                    database.after_job()
                finally:
                    # Out of the running phase: no stop can be asked for from now on, and one
                    # asked for and not yet raised is withdrawn. One raised before this lands
                    # in the handlers below, like the job's own failure.
                    mine = run.come_back()
        except Shutdown:
            outcome = Outcome.INTERRUPTED
        except JobInterrupted:  # raised by a middleware rather than perform: the same request
            outcome = Outcome.PAUSED
        except BaseException as exc:  # the job's own failure, or one before it could start
            outcome, error = Outcome.FAILED, exc
        else:
            outcome = ctx.outcome if ctx.outcome is not None else Outcome.SUCCEEDED
            error = ctx.error
        finally:
            self.current = None
        if mine is None:  # a stop landed before the call above: the run is still in its phase
            mine = run.come_back()
        if watched:
            watchdog.WATCHDOG.unwatch(run)
        return outcome, error, mine


def _perform(ctx: JobContext) -> None:
    """The innermost layer: ``perform``. A job that asks to resume later ends as ``PAUSED``
    here, so the middleware around it sees a run that returned, not an exception."""
    try:
        ctx.value = ctx.instance.run(ctx.job["args"], ctx.job.get("kwargs"))
    except JobInterrupted:
        ctx.outcome = Outcome.PAUSED
