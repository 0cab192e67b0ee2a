"""One job's run on a worker thread: its context, how it was asked to stop, and who settles it.

The processor builds a :class:`Run` around the job's
:class:`~wurk_django.context.JobContext` (held, not changed: the context is what
features read) as the job starts. Two parties may end a run: the thread that runs
the job, when the job returns, and the watchdog, when the job passes its hard time
limit or a revoke's grace and its thread is given up. Exactly one of them must book,
count and acknowledge it, so the run has a phase, changed only under its lock:

``running`` -> ``stopping`` (a soft stop was asked for: a soft time limit, a revoke)
-> ``settled`` (the thread came back first) or ``abandoned`` (the watchdog gave the
thread up first). Whichever party moves the run out of running/stopping settles it
(:func:`~wurk_django.server.run.settle.settle`); the other changes nothing: a thread
that comes back after being abandoned has its late outcome dropped.

An abandoned run gives back at once what its thread held for the worker (its fetch
slot and that slot's pooled connection, and whatever a feature registered with :meth:`Run.hold`), so a thread stuck in a C call costs the worker
one idle thread and nothing else.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, NamedTuple

from ... import asyncrun
from ..stopping import async_raise

if TYPE_CHECKING:
    from ...context import JobContext
    from .manager import Manager

logger = logging.getLogger("wurk_django.worker")


class Phase(enum.Enum):
    RUNNING = "running"
    #: A soft stop was asked for (a soft time limit, a revoke); the job still runs.
    STOPPING = "stopping"
    #: The watchdog gave the thread up and settled the run; the thread can change nothing.
    ABANDONED = "abandoned"
    #: The thread came back and settles (or settled) the run itself.
    SETTLED = "settled"


#: The phases in which the job still runs on its thread.
ACTIVE = frozenset({Phase.RUNNING, Phase.STOPPING})


class StopRequest(NamedTuple):
    """A stop asked of a running job: ``kind`` is ``"soft"`` or ``"hard"`` (its time
    limits) or ``"revoke"``; ``by`` names who revoked it; ``at`` is when (epoch seconds)."""

    kind: str
    by: str | None
    at: float


class HardStop(BaseException):  # noqa: N818 - not an error of the job's
    """Raised into an abandoned job's thread so that it unwinds; a ``BaseException``
    so a job's ``except Exception`` does not swallow it. Its outcome is dropped."""


class Run:
    """One job's run: the job's context, its stop requests and its guarded phase."""

    __slots__ = ("ctx", "manager", "thread", "tid", "log", "started", "phase", "stops", "raised",
                 "give_backs", "ends", "counted", "_lock", "_held", "_claimed")

    def __init__(self, ctx: JobContext, manager: Manager, thread: threading.Thread | None, tid: str,
                 log: dict, give_backs: Any = None, lock: threading.Lock | None = None) -> None:
        self.ctx = ctx
        self.manager = manager  # the worker parts the run is settled with (retrier, job log, stats)
        self.thread = thread
        self.tid = tid
        self.log = log  # the job log context of this job (jid, class, logged attributes)
        self.started = time.monotonic_ns()
        self.phase = Phase.RUNNING
        self.stops: tuple[StopRequest, ...] = ()
        self.raised = False  # an exception was asked for in the thread and may not have landed yet
        self.give_backs = give_backs  # the thread's give-back pacing (settle.GiveBacks)
        self.ends: Any = ()  # the job observers' ends, told once at the settlement
        self.counted = False  # the settlement counted it (stat:processed, the busy map)
        # The thread's own lock, reused from run to run (one run at a time per thread, and an
        # abandoned thread runs no other): a run costs no lock of its own.
        self._lock = lock if lock is not None else threading.Lock()
        self._held: list[Callable[[], None]] | None = None
        self._claimed = False

    @property
    def job(self) -> dict:
        return self.ctx.job or {}

    @property
    def jid(self) -> Any:
        return self.job.get("jid")

    def __repr__(self) -> str:
        return f"<Run jid={self.jid} phase={self.phase.value}>"

    # -- stop requests -----------------------------------------------------

    @property
    def revoked(self) -> StopRequest | None:
        """The revoke that stopped this run, if one did."""
        if not self.stops:
            return None
        return next((stop for stop in self.stops if stop.kind == "revoke"), None)

    def request_stop(self, kind: str, by: str | None = None, at: float | None = None,
                     raise_type: type[BaseException] | None = None) -> bool:
        """Note a stop and, with ``raise_type``, raise it in the job's thread (an ``async def``
        job's task is cancelled instead). False when the run is no longer active: a stop never
        lands in a run that ended."""
        with self._lock:
            if self.phase not in ACTIVE:
                return False
            self.stops += (StopRequest(kind, by, time.time() if at is None else at),)
            self.phase = Phase.STOPPING
            if raise_type is not None:
                self._raise(raise_type)
            return True

    def _raise(self, exc_type: type[BaseException]) -> None:
        thread = self.thread
        if thread is None or asyncrun.cancel(thread, exc_type):
            return
        self.raised = async_raise.raise_in(thread.ident, exc_type) or self.raised
        if not self.raised:
            logger.warning("could not raise %s in job %s (no async exceptions here): only its hard limit "
                           "can stop it", exc_type.__name__, self.jid)

    # -- who settles -------------------------------------------------------

    def abandon(self, kind: str, by: str | None = None, at: float | None = None) -> bool:
        """The watchdog gives the thread up (a hard limit, a revoke's grace): True when
        the run was still active, and the caller now settles it. The thread is asked to
        unwind (:class:`HardStop`); whatever it does afterwards is dropped."""
        with self._lock:
            if self.phase not in ACTIVE:
                return False
            self.phase = Phase.ABANDONED
            self.stops += (StopRequest(kind, by, time.time() if at is None else at),)
            self._raise(HardStop)
            return True

    def come_back(self) -> bool:
        """The job returned on its thread: True when the thread settles the run; False when
        it was abandoned meanwhile (its late outcome is dropped). A stop asked for and not
        yet raised is withdrawn, so it cannot land after the job."""
        with self._lock:
            if self.raised:
                self.raised = False
                async_raise.clear(threading.get_ident())
            # Compared by identity, not looked up in ACTIVE: an Enum's hash is Python code,
            # and this runs on every job.
            phase = self.phase
            if phase is Phase.RUNNING or phase is Phase.STOPPING:
                self.phase = Phase.SETTLED
                return True
            return phase is Phase.SETTLED  # asked again on the way out (only the thread moves a run here)

    def claim(self) -> bool:
        """True exactly once: the settlement's own guard against a second call. (Which party
        settles is the phase's to decide, under the lock: only the one that moved the run
        out of running/stopping calls the settlement, so this needs no lock of its own.)"""
        if self._claimed:
            return False
        self._claimed = True
        return True

    @property
    def abandoned(self) -> bool:
        return self.phase is Phase.ABANDONED

    # -- what the run holds ------------------------------------------------

    def hold(self, give_back: Callable[[], None]) -> Callable[[], None]:
        """Register ``give_back`` to be called once if the run is abandoned before the
        holder gives it back itself; call the returned function to give it back (it is
        called at most once, by whichever side comes first)."""
        done = [False]

        def once() -> None:
            with self._lock:
                if done[0]:
                    return
                done[0] = True
                if self._held is not None and once in self._held:
                    self._held.remove(once)
            give_back()

        with self._lock:
            if self._held is None:
                self._held = []
            self._held.append(once)
        return once

    def give_back_held(self) -> None:
        """Call every registered give-back (the run was abandoned)."""
        with self._lock:
            held = list(self._held or ())
        for give_back in held:
            try:
                give_back()
            except Exception:
                logger.exception("could not give back what abandoned job %s held", self.jid)


#: The run of the job this thread (or task) runs: the processor sets it around each job.
RUN: ContextVar[Run | None] = ContextVar("wurk_run", default=None)


def current() -> Run | None:
    """The run of the job this thread (or task) runs, or ``None`` outside a worker's job."""
    return RUN.get()


def enter(run: Run) -> Any:
    return RUN.set(run)


def leave(token: Any) -> None:
    RUN.reset(token)
