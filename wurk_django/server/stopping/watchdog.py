"""The watchdog: time limits and stop requests of running jobs, one thread per process (issue 27 items 3, 4).

A processor whose job has a ``soft_time_limit`` or ``time_limit`` hands it to
:func:`watch` as the job starts; a revoke of a running job reaches
:func:`stop`. Nothing else: a job without limits costs the processor two
dictionary look-ups and no call here, and the thread is started only when the
first watch arrives. It sleeps until the nearest deadline of the jobs it
watches (woken only when a new one is nearer), so many limited jobs cost one
wake-up per deadline that actually passes, not a timer each.

At a soft deadline the job's thread gets :class:`~wurk_django.errors.SoftTimeLimitExceeded`
(:mod:`.async_raise`; an ``async def`` job's task is cancelled instead). At the
hard deadline the thread is *abandoned*: the processor is marked so that it
neither books nor acknowledges anything if its job ever returns, its manager
starts a fresh processor in its place, and this thread books the job (a
failure with :class:`~wurk_django.errors.HardTimeLimitExceeded`, retried or
dead per the job; a revoked job goes to the dead set naming who stopped it) and
acknowledges it on the fetcher's behalf. The abandoned thread is also asked to
unwind (:class:`HardStop`, a ``BaseException``), which frees it promptly when
it runs Python code and whenever its C call returns otherwise.

The race with a job that ends at its deadline is settled by the processor's
phase lock: the processor leaves the running phase under it, and the watchdog
raises or abandons only while the same run is still in that phase.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from ... import asyncrun, time_limits
from ...errors import HardTimeLimitExceeded, SoftTimeLimitExceeded
from ...outcome import Outcome
from ...revocation import revoked_error  # noqa: F401 - the format lives outside the engine (api/revoke.py)
from . import async_raise

if TYPE_CHECKING:
    from ...context import JobContext
    from ..run.processor import Processor

logger = logging.getLogger("wurk_django.worker")

#: Seconds between attempts to book and acknowledge an abandoned job while Redis refuses.
RETRY_EVERY = 1.0
#: The longest single wait of the thread; it looks again after it (a deadline never is that far).
_LONGEST_WAIT = 3600.0


class HardStop(BaseException):  # noqa: N818 - not an error of the job's
    """Raised into an abandoned job's thread so that it unwinds; a ``BaseException``
    so a job's ``except Exception`` does not swallow it. Its result is ignored."""


class Watch:
    """One running job under watch: its run (the job's context) and its deadlines."""

    __slots__ = ("processor", "ctx", "soft_at", "hard_at", "soft_done", "revoked_by", "revoked_at")

    def __init__(self, processor: Processor, ctx: JobContext, soft_at: float | None, hard_at: float | None) -> None:
        self.processor = processor
        self.ctx = ctx
        self.soft_at = soft_at
        self.hard_at = hard_at
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
        self._watches: dict[Processor, Watch] = {}
        self._wake_at = float("inf")  # when the thread wakes next (inf: it waits for a notify)
        self._thread: threading.Thread | None = None
        # Abandoned runs not yet booked and acknowledged: [processor, ctx, watch, booked].
        self._pending: list[list[Any]] = []

    # -- from processors and the revoke command ------------------------------

    def watch(self, processor: Processor, ctx: JobContext, soft: float | None, hard: float | None) -> Watch:
        # The processor hands over checked limits (time_limits.read); checked again here so
        # that no value (inf, nan, 1e308, a huge int, a bool) can become a deadline the
        # thread's wait would overflow on, every second for the life of the process.
        soft, hard = time_limits.seconds(soft), time_limits.seconds(hard)
        now = time.monotonic()
        entry = Watch(processor, ctx, now + soft if soft is not None else None, now + hard if hard is not None else None)
        self._add(entry)
        return entry

    def unwatch(self, processor: Processor) -> None:
        # No notify: the thread finds the watch gone when it wakes.
        with self._cond:
            self._watches.pop(processor, None)

    def stop(self, processor: Processor, ctx: JobContext, by: str, at: float, grace: float) -> bool:
        """Stop ``processor``'s run ``ctx`` (a revoke): the soft stop now, the hard one after
        ``grace`` seconds. False if that run is over already."""
        with processor.phase_lock:
            if processor.running is not ctx:
                return False
            processor.revoked = (by, at)
        now = time.monotonic()
        with self._cond:
            entry = self._watches.get(processor)
            if entry is None or entry.ctx is not ctx:
                entry = Watch(processor, ctx, None, None)
            entry.revoked_by, entry.revoked_at = by, at
            entry.soft_at, entry.soft_done = now, False
            entry.hard_at = now + grace if entry.hard_at is None else min(entry.hard_at, now + grace)
        self._add(entry)
        return True

    def _add(self, entry: Watch) -> None:
        with self._cond:
            self._watches[entry.processor] = entry
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
            upcoming = [w.next_at() for w in self._watches.values() if w.next_at() > now]
            if not due and not self._pending:
                self._wake_at = min(upcoming, default=float("inf"))
                # Bounded: Condition.wait raises OverflowError past threading.TIMEOUT_MAX.
                timeout = None if self._wake_at == float("inf") else min(self._wake_at - now, _LONGEST_WAIT)
                self._cond.wait(timeout)
                self._wake_at = float("inf")
                return
            for entry in due:
                if entry.hard_at is not None and entry.hard_at <= now:
                    self._watches.pop(entry.processor, None)
                else:
                    entry.soft_done = True
        for entry in due:
            if entry.hard_at is not None and entry.hard_at <= now:
                self._abandon(entry)
            else:
                self._soft(entry)
        self._book_pending()
        if self._pending:
            time.sleep(RETRY_EVERY)

    def _soft(self, entry: Watch) -> None:
        processor = entry.processor
        with processor.phase_lock:
            if processor.running is not entry.ctx:
                return
            thread = processor.thread
            if thread is None:
                return
            if not asyncrun.cancel(thread, SoftTimeLimitExceeded):
                processor.raised = async_raise.raise_in(thread.ident, SoftTimeLimitExceeded)
                if not processor.raised:
                    logger.warning("could not raise the soft stop in job %s (no async exceptions here): "
                                   "only its hard limit can stop it", entry.ctx.job.get("jid"))
        logger.warning("job %s (%s) reached its %s: SoftTimeLimitExceeded raised in its thread",
                       entry.ctx.job.get("jid"), entry.ctx.job.get("class"),
                       f"revoke by {entry.revoked_by}" if entry.revoked_by is not None else "soft time limit")

    def _abandon(self, entry: Watch) -> None:
        processor, ctx = entry.processor, entry.ctx
        with processor.phase_lock:
            if processor.running is not ctx:
                return  # it ended meanwhile: the processor settles it
            processor.abandoned = True
            processor.done = True
            processor.running = None
            thread = processor.thread
            if thread is not None and not asyncrun.cancel(thread, HardStop):
                processor.raised = async_raise.raise_in(thread.ident, HardStop)
        job = ctx.job
        logger.warning("job %s (%s) reached its %s: its thread is abandoned and replaced",
                       job.get("jid"), job.get("class"),
                       f"revoke grace (stopped by {entry.revoked_by})" if entry.revoked_by is not None
                       else "hard time limit")
        processor.manager.replace(processor)
        with self._cond:
            self._pending.append([processor, ctx, entry, False])

    def _book_pending(self) -> None:
        with self._cond:
            pending, self._pending = self._pending, []
        failed = []
        for item in pending:
            try:
                _settle_abandoned(item)
            except Exception as exc:
                logger.warning("could not yet book the abandoned job %s (%s); trying again",
                               item[1].job.get("jid"), exc)
                failed.append(item)
        if failed:
            with self._cond:
                self._pending[:0] = failed


def _settle_abandoned(item: list[Any]) -> None:
    """Book the abandoned run and acknowledge its job, for the thread that will not.
    Raises when Redis refuses; the caller tries again (the job stays in the private list
    meanwhile, and a crash of the process hands it to the reaper: never lost)."""
    processor, ctx, entry, booked = item
    if not booked:
        if entry.revoked_by is not None:
            processor.bury_revoked(ctx, entry.revoked_by, entry.revoked_at or time.time())
        else:
            hard = ctx.job.get("time_limit")
            exc = HardTimeLimitExceeded(f"the job ran past its hard time limit (time_limit={hard}s): "
                                        "its thread was abandoned and replaced")
            outcome = processor.retrier.book(ctx.job_class, ctx.raw, ctx.queue, exc)
            if outcome is not Outcome.INTERRUPTED:
                processor._failed(ctx.job, exc)
        item[3] = True  # booked: a retry after a failed ACK must not book again
        processor.state.end(processor.tid, True)
    settle = getattr(processor.fetcher, "settle_abandoned", None)
    if settle is not None:
        settle(ctx.unit)
    else:
        ctx.unit.acknowledge()


WATCHDOG = Watchdog()
#: Every processor of this process (all managers): a revoke looks for the jid among their runs.
PROCESSORS: weakref.WeakSet[Processor] = weakref.WeakSet()
