"""The run gate: how many of a process's job threads run short jobs at the same time.

Python threads share one interpreter lock (the GIL). A thread lets go of it for
each system call, and a redis-py command makes five; with ten threads running
short jobs, each of those calls hands the lock to another thread and the caller
queues to get it back, which costs a futex wake-up on each side. On a VM that is
tens of microseconds of CPU each time: a worker of ten threads draining jobs that
make one redis-py call spent 1.3-1.6x the CPU per job of a worker of three, and ran
fewer of them (docs/benchmarks.md, The run gate). Past the threads it takes to keep the
interpreter busy while others wait on I/O, more running threads add hand-overs,
not throughput.

On in worker processes unless ``GIL_GATE`` is False (the launcher decides: an
embedded worker keeps it off, since the CPU time and sleeps it reads are the whole
process's, web threads included). On noop jobs and jobs on ``redis_client()`` it
never changed the limit, on 2 ms pure-Python jobs it took it from 10 to 8, and it
leaves ORM jobs alone: all measured 1.00x against no gate. On jobs making one plain
redis-py call, 1.10-1.30x (docs/benchmarks.md, The run gate).

So a job thread holds a pass while it runs a job, and the gate gives out at most
``limit`` of them. The limit starts at the thread count (what a worker does
without the gate) and follows what the jobs do, reviewed every ``REVIEW_EVERY``
seconds of job starts from the process's CPU time (:func:`next_limit`):

* threads waited for a pass while the process used less than ``IDLE_SHARE`` of a
  CPU: jobs wait on I/O and more of them can run, so the limit grows;
* the process used more than ``PARALLEL_SHARE`` of a CPU: jobs run code that lets
  go of the lock (C extensions) in parallel, so the limit grows;
* the process used about a whole CPU while many short jobs started, and its threads
  went to sleep at least ``SLEEPY_JOB`` times a job in this window and the one
  before (the hand-overs the gate saves; few sleeps, little to save): the
  interpreter is the bottleneck, so the limit shrinks by one, to ``FLOOR`` at least.

At the full limit, with no pass out, no pass is taken at all (nobody could wait): the
worker asks :meth:`RunGate.wide_open`, which counts the start, and runs the job as it
would without the gate, so a gate that never shrinks costs one call a job. A job
thread that opens a database connection gives its pass back (:func:`step_aside`), and
one that holds a connection takes none: fewer jobs at once would mean fewer queries
in flight, and the worker ran 0.74-0.78x the ORM jobs a second while they counted.

A job running for longer than ``LONG_JOB`` seconds stops counting against the
limit, so a slow job (a long computation, a call to a slow service, a thread stuck
in C) never keeps other jobs waiting longer than that, and the gate cannot starve
anything: a job waits at most ``LONG_JOB`` for each pass holder ahead of it.

A thread keeps its pass from one job to the next while it has the next one in hand
(fetched ahead), and gives it back before it asks Redis for more, so another
thread runs during that round trip. With no jobs running the gate does nothing:
reviews happen only when jobs start.

Concurrency contract: ``_passes`` gains and loses entries only under ``_cond``; a
holder re-stamping its own entry on the way to its next job does so without the
lock (one dict store of an existing key). A holder whose pass was taken off it as
a long job meanwhile runs that next job uncounted, which only lets one more job in.
"""

from __future__ import annotations

import logging
import threading
import time
from operator import itemgetter

try:
    import resource
except ImportError:  # Windows has none: no count of sleeps there, so the limit never shrinks
    resource = None  # type: ignore[assignment]

logger = logging.getLogger("wurk_django.worker")

#: Seconds after which a running job no longer counts against the limit.
LONG_JOB = 0.005
#: Seconds of job starts between two reviews of the limit.
REVIEW_EVERY = 0.1
#: Below this share of one CPU, with threads waiting, the jobs are waiting on I/O.
IDLE_SHARE = 0.75
#: At or above this share of one CPU, with ``BUSY_JOBS`` started, the interpreter is saturated.
BUSY_SHARE = 0.85
#: Above this share of one CPU, jobs run in parallel outside the interpreter lock.
PARALLEL_SHARE = 1.3
#: Job starts in one review window that make the jobs short enough for hand-overs to matter.
BUSY_JOBS = 20
#: The least the limit goes down to: two threads overlap one's I/O with the other's work.
FLOOR = 2
#: Times a thread went to sleep (a system call that waited, the GIL, a lock) per job
#: start, at or above which the hand-overs are worth saving. A job making one plain
#: redis-py call sleeps 9-10 times; one on ``redis_client()`` 2-3; a noop job less than 1.
SLEEPY_JOB = 5.0
#: Longest untimed sleep of a waiting thread: a quiet worker opens the gate, and a
#: waiter checks again at least this often whatever happens.
WAIT_CAP = 0.5


def next_limit(limit: int, ceiling: int, cpu_share: float, waits: int, starts: int,
               sleeps_per_job: float) -> int:
    """The limit after a review window in which the process used ``cpu_share`` of
    one CPU, threads waited for a pass ``waits`` times and ``starts`` jobs started;
    ``sleeps_per_job``: how often the process's threads went to sleep per job start,
    the fewer of this window's and the one before (the first window of a drain is
    the threads starting up, and sleeps more than its jobs do)."""
    if cpu_share > PARALLEL_SHARE or (waits and cpu_share < IDLE_SHARE):
        return min(ceiling, limit + max(1, limit // 2))
    if cpu_share >= BUSY_SHARE and starts >= BUSY_JOBS and sleeps_per_job >= SLEEPY_JOB and limit > FLOOR:
        return limit - 1
    return limit


_holder = threading.local()  # .gate: the gate whose pass this thread holds


def step_aside() -> None:
    """The job on this thread now waits on a database: its pass goes to a waiting thread
    and it runs on uncounted. Called when a job thread opens a database connection."""
    gate = getattr(_holder, "gate", None)
    if gate is not None:
        gate.leave()


def _sleeps() -> int:
    """Voluntary context switches of the whole process so far (every thread's)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_nvcsw if resource is not None else 0


class RunGate:
    """Hands out passes to run a job; one per worker process, shared by its capsules."""

    def __init__(self, threads: int, enabled: bool = True) -> None:
        self.ceiling = threads
        self.limit = threads
        # Nothing to gain below the floor; off, every call returns at once.
        self.enabled = enabled and threads > FLOOR
        self._cond = threading.Condition(threading.Lock())
        self._passes: dict[int, float] = {}  # thread ident -> when its current job started
        self._waiting = 0
        self._timing = False  # one waiter sleeps with a timeout, to retire the oldest job as long
        self._open = False
        self._waits = 0
        self._starts = 0
        self._window_at = time.monotonic()
        self._window_cpu = time.process_time()
        self._window_sleeps = _sleeps()
        self._sleeps_per_job = 0.0  # the window before's

    def enter(self) -> None:
        """Take a pass (or keep this thread's) before running a job; waits while
        ``limit`` short jobs run."""
        if self.enabled and not self.wide_open():
            self.take()

    def wide_open(self) -> bool:
        """Count a job start (reviewing the limit when one is due); True when every thread
        may run it without a pass: the limit is at the thread count and no pass is out.
        The worker asks this before each job and calls :meth:`take` only when False, so
        an open gate costs a job this one call (no pass, no lock)."""
        self._starts += 1  # not under the lock: a lost count only blurs a review
        now = time.monotonic()
        if now - self._window_at >= REVIEW_EVERY:
            self._review(now)
        return self.limit >= self.ceiling and not self._passes

    def take(self) -> None:
        """Take a pass (or keep this thread's) for the job this thread starts, counted
        already by :meth:`wide_open`; waits while ``limit`` short jobs run."""
        if not self.enabled:
            return
        me = threading.get_ident()
        now = time.monotonic()
        passes = self._passes
        if me in passes:
            passes[me] = now
            return
        if self.limit >= self.ceiling:
            # Nobody can wait at the full limit: no pass. Jobs that run on without one
            # count from their next start on, once the limit went down.
            return
        with self._cond:
            while not self._open and len(passes) >= self.limit:
                oldest, started = min(passes.items(), key=itemgetter(1))
                if now - started >= LONG_JOB:
                    del passes[oldest]  # a long job: it no longer counts
                    continue
                self._waits += 1
                self._waiting += 1
                try:
                    if not self._timing:
                        self._timing = True
                        try:
                            self._cond.wait(LONG_JOB - (now - started))
                        finally:
                            self._timing = False
                        if self._waiting > 1:
                            self._cond.notify()  # another waiter takes the timing over
                    else:
                        self._cond.wait(WAIT_CAP)
                finally:
                    self._waiting -= 1
                now = time.monotonic()
            passes[me] = now
        _holder.gate = self

    def leave(self) -> None:
        """Give this thread's pass back: it has no job in hand, its job waits on a database
        (:func:`step_aside`), or it exits."""
        if not self.enabled or threading.get_ident() not in self._passes:
            return
        _holder.gate = None
        with self._cond:
            if self._passes.pop(threading.get_ident(), None) is not None and self._waiting:
                self._cond.notify()

    def release(self, ident: int | None) -> None:
        """Take thread ``ident``'s pass back for it: its thread was abandoned (a hard stop)
        and may never come back to give it itself."""
        if not self.enabled or ident is None:
            return
        with self._cond:
            if self._passes.pop(ident, None) is not None and self._waiting:
                self._cond.notify()

    def open(self) -> None:
        """The worker is quieting: every waiter goes through at once (to hand its job back)."""
        with self._cond:
            self._open = True
            self._cond.notify_all()

    def running(self) -> int:
        """Pass holders now (long jobs that stopped counting excluded)."""
        return len(self._passes)

    def _review(self, now: float) -> None:
        if not self._cond.acquire(blocking=False):
            return  # another thread is in the gate; the next start reviews
        try:
            if now - self._window_at < REVIEW_EVERY:
                return
            cpu, sleeps = time.process_time(), _sleeps()
            share = (cpu - self._window_cpu) / (now - self._window_at)
            per_job = (sleeps - self._window_sleeps) / max(1, self._starts)
            before = self.limit
            self.limit = next_limit(before, self.ceiling, share, self._waits, self._starts,
                                    min(per_job, self._sleeps_per_job))
            if self.limit != before:
                if self.limit > before and self._waiting:
                    self._cond.notify(self.limit - before)
                if logger.isEnabledFor(logging.DEBUG):
                    logger.debug("run gate: %d -> %d jobs at once (%.2f of a CPU, %d starts, %d waits, "
                                 "%.1f sleeps a job)", before, self.limit, share, self._starts, self._waits, per_job)
            self._window_at, self._window_cpu, self._window_sleeps = now, cpu, sleeps
            self._sleeps_per_job = per_job
            self._waits = self._starts = 0
        finally:
            self._cond.release()
