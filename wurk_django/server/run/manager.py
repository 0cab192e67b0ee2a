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
from ...conf import Config
from ...errors import Shutdown
from ...metrics.tracker import MetricsTracker
from ...middleware import server_chain
from ...redis.connection import get_redis
from ..fetch.reliable import ReliableFetch
from ..retry import Retrier
from ..state import WorkerState
from ..threads import raise_in_thread
from .gate import RunGate
from .joblog import JobLogger
from .processor import Processor

logger = logging.getLogger("wurk_django.worker")

PAUSE_TIME = 0.1 if sys.stdout.isatty() else 0.5
HARD_SHUTDOWN_WAIT = 3.0


def _default_shutdown_request() -> None:
    os.kill(os.getpid(), signal.SIGTERM)


class Manager:
    def __init__(self, config: Config, state: WorkerState, metrics: MetricsTracker, name: str = "default",
                 request_shutdown: Callable[[], None] | None = None, *, gate: RunGate) -> None:
        self.name = name
        self.gate = gate  # the process's one run gate, shared by every manager (the launcher makes it)
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
        if replacement is None:
            self._request_shutdown()
        else:
            replacement.start()

    def replace(self, processor: Processor) -> None:
        """``processor``'s thread was abandoned (a hard time limit, a revoke): a fresh
        processor takes its place now; the abandoned one never calls back (watchdog.py)."""
        self.processor_exited(processor)

    def quiet(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        self.stop_flag.set()
        self.fetcher.terminate()
        self.gate.open()  # threads waiting for their turn hand their jobs back now
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
        time.sleep(PAUSE_TIME)
        while self.alive_processors() and deadline - time.monotonic() > PAUSE_TIME:
            time.sleep(PAUSE_TIME)
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
