"""Manager: keeps ``concurrency`` processors alive and drains them on stop (RUN-120, RUN-121)."""

from __future__ import annotations

import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import redis as redis_lib

from ... import asyncrun, payload
from ... import deadline as deadlines
from ...conf import Config
from ...errors import DeadlineExceeded, HardTimeLimitExceeded, Shutdown
from ...metrics.tracker import MetricsTracker
from ...middleware import server_chain
from ...outcome import Outcome
from ...redis.connection import get_redis
from ...revocation import revoked_error
from ..fetch.reliable import ReliableFetch
from ..retry import Retrier
from ..state import WorkerState
from ..stopping import watchdog
from ..threads import raise_in_thread, spawn
from .joblog import JobLogger
from .processor import Processor
from .run import Run
from .settle import settle

#: Abandoned threads still stuck that a process keeps at least (ABANDONED_THREADS_LIMIT unset).
ABANDONED_FLOOR = 16
#: Seconds an abandoned thread has to unwind before it counts as stuck.
UNWIND_GRACE = 1.0

logger = logging.getLogger("wurk_django.worker")

PAUSE_TIME = 0.1 if sys.stdout.isatty() else 0.5
STOP_POLL = 0.02  # how often a stop looks whether every job thread has ended
HARD_SHUTDOWN_WAIT = 3.0


def _default_shutdown_request() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


class Manager:
    def __init__(self, config: Config, state: WorkerState, metrics: MetricsTracker, name: str = "default",
                 request_shutdown: Callable[[], None] | None = None) -> None:
        self.name = name
        self.metrics = metrics
        self.config = config
        self.state = state
        fetch_class = config.fetch_class or ReliableFetch
        self.fetcher = fetch_class(config)
        self.retrier = Retrier(config)
        self.joblog = JobLogger(config.logged_job_attributes, config.skip_default_job_logging)
        self.server_chain = server_chain(config)
        self.stop_flag = threading.Event()  # what Job.interrupted() reads
        self._request_shutdown = request_shutdown or _default_shutdown_request
        self._lock = threading.Lock()
        self._processors: set[Processor] = set()
        self._stopping = False
        # Threads given up (a hard stop) that may still be stuck in their job: past the
        # limit the process restarts itself (each one keeps its stack, its job's memory,
        # whatever its job opened, until it unwinds).
        self._abandoned: list[threading.Thread] = []
        limit = getattr(config, "abandoned_threads_limit", None)
        self.abandoned_limit = int(limit) if limit else max(int(config.concurrency), ABANDONED_FLOOR)
        self.restarting: str | None = None  # why the process restarts itself, once it does
        self.replace_failed = False
        watchdog.MANAGERS.add(self)

    def redis(self) -> redis_lib.Redis:
        return get_redis(config=self.config)

    def start(self) -> None:
        with self._lock:
            new = [Processor(self) for _ in range(self.config.concurrency)]
            self._processors.update(new)
        for processor in new:
            processor.start()

    def processor_exited(self, processor: Processor) -> None:
        """A processor thread ended: replace it unless we are stopping (RUN-120)."""
        with self._lock:
            self._processors.discard(processor)
            if self._stopping:
                return
            try:
                replacement = Processor(self)
                self._processors.add(replacement)
            except Exception:
                logger.exception("could not replace a processor; shutting down")
                replacement = None
                self.replace_failed = True
        if replacement is None:
            self._request_shutdown()
        else:
            replacement.start()

    def runs(self) -> list[Run]:
        """The runs in progress on this manager's threads (a revoke looks for its jid here)."""
        with self._lock:
            processors = list(self._processors)
        return [run for run in (p.current for p in processors) if run is not None]

    def abandon(self, run: Run) -> None:
        """The watchdog gave ``run``'s thread up (a hard time limit, a revoke's grace; the run
        is in its abandoned phase already). Everything the thread held for the worker comes
        back now: its fetch slot and that slot's connection, what its features registered
        with :meth:`Run.hold`; a fresh processor takes its place, so the worker keeps its
        full concurrency; and the run is settled, off the watchdog's thread
        (a Redis outage then stalls that settlement only). Past the limit of abandoned
        threads still stuck, the process restarts itself."""
        with self._lock:
            processor = next((p for p in self._processors if p.thread is run.thread), None)
            if processor is not None:
                processor.abandoned = processor.done = True
            if run.thread is not None:
                self._abandoned.append(run.thread)
        try:
            self._take_back_slot(run)
            run.give_back_held()
        finally:
            if processor is not None:
                self.processor_exited(processor)
            spawn(f"{self.name}/settle-abandoned", lambda: self._settle_abandoned(run), self.config)

    def _take_back_slot(self, run: Run) -> None:
        abandon = getattr(self.fetcher, "abandon", None)  # a custom FETCH_CLASS may have none
        if abandon is not None and run.ctx.unit is not None:
            abandon(run.ctx.unit)

    def _settle_abandoned(self, run: Run) -> None:
        revoked = run.revoked
        if revoked is not None:
            error: BaseException = revoked_error(revoked.by, revoked.at)
        elif any(stop.kind == "deadline" for stop in run.stops):
            error = DeadlineExceeded(f"the job ran past its deadline {deadlines.shown(float(run.job['deadline']))}: "
                                     "its thread was abandoned and replaced")
        else:
            error = HardTimeLimitExceeded(f"the job ran past its hard time limit (time_limit={run.job.get('time_limit')}s): "
                                          "its thread was abandoned and replaced")
        settle(run, Outcome.FAILED, error)
        # Counted a moment later: a thread that runs Python code unwinds at once (HardStop),
        # and only the ones still stuck count against the limit.
        time.sleep(UNWIND_GRACE)
        self._check_abandoned()

    def abandoned_alive(self) -> int:
        """Abandoned threads still stuck in their job (those that unwound are forgotten)."""
        with self._lock:
            self._abandoned = [thread for thread in self._abandoned if thread.is_alive()]
            return len(self._abandoned)

    def _check_abandoned(self) -> None:
        stuck = self.abandoned_alive()
        if stuck <= self.abandoned_limit or self.restarting is not None or self._stopping:
            return
        self.restarting = (f"{stuck} abandoned job threads are still stuck, past the limit of "
                           f"{self.abandoned_limit} (ABANDONED_THREADS_LIMIT)")
        logger.error("%s: restarting the worker cleanly so a fresh process takes over (running jobs finish "
                     "or are requeued; the stuck threads go with this process)", self.restarting)
        self._request_shutdown()

    def fetch_trouble(self) -> list[str]:
        """Why this manager can no longer fetch, for ``/live``; empty while it can."""
        reasons = []
        if self.restarting is not None:
            reasons.append(f"restarting: {self.restarting}")
        if self.replace_failed:
            reasons.append("a job thread could not be replaced")
        return reasons

    def quiet(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        self.stop_flag.set()
        self.fetcher.terminate()
        with self._lock:
            processors = list(self._processors)
        for processor in processors:
            processor.terminate()

    def alive_processors(self) -> list[Processor]:
        with self._lock:
            return [p for p in self._processors if p.thread is not None and p.thread.is_alive()]

    def stop(self, deadline: float) -> None:
        """Quiet, wait for running jobs until ``deadline`` (monotonic), then hard-stop the rest."""
        self.quiet()
        # Looked at often: an idle worker's threads end within a few milliseconds of the
        # quiet (their blocked fetches are ended too), and the stop should not outlast them.
        while self.alive_processors() and deadline - time.monotonic() > PAUSE_TIME:
            time.sleep(STOP_POLL)
        busy = [p for p in self.alive_processors() if p.unit is not None]
        if not self.alive_processors():
            return
        self.hard_shutdown(busy)

    def hard_shutdown(self, busy: list[Processor]) -> None:
        """Requeue every in-flight job, then interrupt its thread (CORE-157, RUN-203)."""
        units: list[Any] = []
        started: list[int | None] = []
        for processor in busy:
            processor.killed = True  # set first: a job finishing now must not ACK (RUN-803)
            if processor.unit is not None:
                units.append(processor.unit)
                started.append(self.state.started_at(processor.tid))
        if units:
            logger.warning("terminating %d busy job(s): %s", len(units),
                           ", ".join(str(u.jid) for u in units))
            self.fetcher.bulk_requeue(units)
            self._log_requeued(units, started)
        for processor in busy:
            # An async job's loop sleeps in C until an event: cancel its task (RUN-850).
            if processor.thread is not None and not asyncrun.cancel(processor.thread):
                raise_in_thread(processor.thread, Shutdown)
        deadline = time.monotonic() + HARD_SHUTDOWN_WAIT
        while self.alive_processors() and time.monotonic() < deadline:
            time.sleep(0.05)

    def _log_requeued(self, units: list[Any], started: list[int | None]) -> None:
        """One ``requeued`` job log line per job put back, written here and now: its
        thread may be stuck in C code until the process exits."""
        now = time.time()
        for unit, began in zip(units, started, strict=True):
            try:
                job = payload.loads(unit.job)
                job = job if isinstance(job, dict) else {}
            except Exception:
                job = {}
            job.setdefault("jid", unit.jid)
            elapsed = round(max(now - began, 0.0), 3) if began is not None else 0.0
            try:
                self.joblog.requeued_at_shutdown(self.joblog.context(job), elapsed)
            except Exception:
                logger.exception("could not log the requeue of %s", unit.jid)


def drain_all(managers: list[Manager], deadline: float, config: Any) -> None:
    """Every capsule's manager drains at once against the one deadline, each requeueing
    what it still runs then (CORE-157, RUN-111): a stop takes the longest capsule's time,
    not the sum of theirs. The launcher's and the cluster worker's stop."""
    if len(managers) == 1:
        managers[0].stop(deadline)
        return
    stoppers = [spawn(f"{manager.name}/stopper", lambda manager=manager: manager.stop(deadline), config)
                for manager in managers]
    for stopper in stoppers:
        # Bounded (RUN-112): the drain, the hard shutdown's wait, and a little slack.
        stopper.join(max(deadline - time.monotonic(), 0.0) + HARD_SHUTDOWN_WAIT + 2.0)
