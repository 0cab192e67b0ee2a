"""The watchdog: time limits and stop requests of running jobs, one thread per process (issue 27 items 3, 4).

A processor whose job has a ``soft_time_limit`` or ``time_limit`` hands the job's
:class:`~wurk_django.server.run.run.Run` to :meth:`Watchdog.watch` as the job
starts; a revoke of a running job reaches :meth:`Watchdog.stop`. Nothing else: a
job without limits costs the processor two dictionary look-ups and no call here,
and the thread is started only when the first watch arrives. It sleeps until the
nearest deadline of the jobs it watches (woken only when a new one is nearer), so
many limited jobs cost one wake-up per deadline that actually passes, not a timer each.

A job's ``deadline`` (issue 47 item 5) joins its watch as a hard deadline
(:meth:`Watchdog.watch_deadline`, from the deadline feature's middleware), and is
settled as one with :class:`~wurk_django.errors.DeadlineExceeded`.

At a soft deadline the run is asked to stop: :class:`~wurk_django.errors.SoftTimeLimitExceeded`
is raised in its thread (an ``async def`` job's task is cancelled instead). At the
hard deadline the run is *abandoned* (:meth:`Run.abandon`, under the run's lock,
only while it still runs: a job that ended at its deadline is settled by its own
thread) and handed to its manager (:meth:`Manager.abandon`), which takes back what
the thread held, starts a replacement and settles the run through the one
settlement (:func:`~wurk_django.server.run.settle.settle`): a failure with
:class:`~wurk_django.errors.HardTimeLimitExceeded` (retried or dead per the job),
or the dead set naming who revoked it. The watchdog sees runs and managers only.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from typing import TYPE_CHECKING

from ... import time_limits
from ...errors import SoftTimeLimitExceeded
from ...revocation import revoked_error  # the format lives outside the engine (api/revoke.py)
from ..run.run import ACTIVE, HardStop, Run

if TYPE_CHECKING:
    from ..run.manager import Manager

__all__ = ["MANAGERS", "WATCHDOG", "HardStop", "Watch", "Watchdog", "revoked_error"]

logger = logging.getLogger("wurk_django.worker")

#: The longest single wait of the thread; it looks again after it (a deadline never is that far).
_LONGEST_WAIT = 3600.0
#: Seconds the thread rests after a tick that failed, before it goes on.
RETRY_EVERY = 1.0


class Watch:
    """One running job under watch: its run and its deadlines."""

    __slots__ = ("run", "soft_at", "hard_at", "hard_kind", "soft_done", "revoked_by", "revoked_at")

    def __init__(self, run: Run, soft_at: float | None, hard_at: float | None) -> None:
        self.run = run
        self.soft_at = soft_at
        self.hard_at = hard_at
        #: What ``hard_at`` is: the job's ``time_limit`` ("hard") or its ``deadline``.
        self.hard_kind = "hard"
        self.soft_done = False
        self.revoked_by: str | None = None
        self.revoked_at: float | None = None

    def next_at(self) -> float:
        if self.soft_at is not None and not self.soft_done:
            return self.soft_at if self.hard_at is None else min(self.soft_at, self.hard_at)
        return self.hard_at if self.hard_at is not None else float("inf")


class Watchdog:
    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._watches: dict[Run, Watch] = {}
        self._wake_at = float("inf")  # when the thread wakes next (inf: it waits for a notify)
        self._thread: threading.Thread | None = None

    # -- from processors and the revoke command ------------------------------

    def watch(self, run: Run, soft: float | None, hard: float | None) -> Watch:
        # The processor hands over checked limits (time_limits.read); checked again here so
        # that no value (inf, nan, 1e308, a huge int, a bool) can become a deadline the
        # thread's wait would overflow on, every second for the life of the process.
        soft, hard = time_limits.seconds(soft), time_limits.seconds(hard)
        now = time.monotonic()
        entry = Watch(run, now + soft if soft is not None else None, now + hard if hard is not None else None)
        self._add(entry)
        return entry

    def watch_deadline(self, run: Run, at: float) -> None:
        """Stop ``run`` at ``at`` (epoch seconds: the job's ``deadline``) as at a hard time
        limit, unless its ``time_limit`` stops it sooner. Joins the run's watch for its time
        limits when it has one (the processor hands those over first)."""
        if not math.isfinite(at):
            return  # no time (a foreign payload's NaN or infinity): nothing to stop at
        # A wall-clock deadline becomes a point on the monotonic clock the thread sleeps on.
        # However far, it cannot overflow the wait: one wait is at most _LONGEST_WAIT.
        hard_at = time.monotonic() + max(at - time.time(), 0.0)
        with self._cond:
            entry = self._watches.get(run)
            if entry is None:
                entry = Watch(run, None, None)
            if entry.hard_at is None or hard_at < entry.hard_at:
                entry.hard_at, entry.hard_kind = hard_at, "deadline"
        self._add(entry)

    def unwatch(self, run: Run) -> None:
        """The run ended: forget its watch. No notify: a thread waiting for its deadline
        finds it gone when it wakes."""
        with self._cond:
            self._watches.pop(run, None)

    def stop(self, run: Run, by: str, at: float, grace: float) -> bool:
        """Stop ``run`` (a revoke): the soft stop now, the hard one after ``grace`` seconds.
        False if that run is over already, or a revoke stops it already: the same revoke
        heard twice (on the revoke channel, then through the signal list at the next beat)
        must not raise the soft stop again in a job that caught the first one, nor put off
        its hard stop."""
        if run.phase not in ACTIVE or run.revoked is not None:
            return False
        now = time.monotonic()
        with self._cond:
            entry = self._watches.get(run)
            if entry is None:
                entry = Watch(run, None, None)
            elif entry.revoked_by is not None:
                return False
            entry.revoked_by, entry.revoked_at = by, at
            entry.soft_at, entry.soft_done = now, False
            entry.hard_at = now + grace if entry.hard_at is None else min(entry.hard_at, now + grace)
        self._add(entry)
        return True

    def _add(self, entry: Watch) -> None:
        with self._cond:
            self._watches[entry.run] = entry
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, name="wurk-watchdog", daemon=True)
                self._thread.start()
            if entry.next_at() < self._wake_at:
                self._cond.notify()

    # -- the thread ------------------------------------------------------

    def _loop(self) -> None:
        while True:
            try:
                self._tick()
            except Exception:  # the watchdog must outlive any one job's trouble
                logger.exception("the time-limit watchdog failed; it goes on")
                time.sleep(RETRY_EVERY)

    def _tick(self) -> None:
        with self._cond:
            now = time.monotonic()
            due = [w for w in self._watches.values() if w.next_at() <= now]
            if not due:
                upcoming = [w.next_at() for w in self._watches.values()]
                self._wake_at = min(upcoming, default=float("inf"))
                # Bounded: Condition.wait raises OverflowError past threading.TIMEOUT_MAX.
                timeout = None if self._wake_at == float("inf") else min(self._wake_at - now, _LONGEST_WAIT)
                self._cond.wait(timeout)
                self._wake_at = float("inf")
                return
            for entry in due:
                if entry.hard_at is not None and entry.hard_at <= now:
                    self._watches.pop(entry.run, None)
                else:
                    entry.soft_done = True
        for entry in due:
            if entry.hard_at is not None and entry.hard_at <= now:
                self._abandon(entry)
            else:
                self._soft(entry)

    def _soft(self, entry: Watch) -> None:
        run = entry.run
        revoke = entry.revoked_by is not None
        if not run.request_stop("revoke" if revoke else "soft", entry.revoked_by, entry.revoked_at,
                                raise_type=SoftTimeLimitExceeded):
            return  # it ended meanwhile
        logger.warning("job %s (%s) reached its %s: SoftTimeLimitExceeded raised in its thread",
                       run.jid, run.job.get("class"),
                       f"revoke by {entry.revoked_by}" if revoke else "soft time limit")

    def _abandon(self, entry: Watch) -> None:
        run = entry.run
        revoke = entry.revoked_by is not None
        kind = "revoke" if revoke else entry.hard_kind
        if not run.abandon(kind, entry.revoked_by, entry.revoked_at):
            return  # it ended meanwhile: its thread settles it
        logger.warning("job %s (%s) reached its %s: its thread is abandoned and replaced",
                       run.jid, run.job.get("class"),
                       f"revoke grace (stopped by {entry.revoked_by})" if revoke
                       else "deadline" if kind == "deadline" else "hard time limit")
        run.manager.abandon(run)


WATCHDOG = Watchdog()
#: Every manager of this process (one per capsule): a revoke looks for the jid among their runs.
MANAGERS: weakref.WeakSet[Manager] = weakref.WeakSet()
