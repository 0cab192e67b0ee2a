"""Reliable client push: jobs pushed while Redis is unreachable wait in memory (PRO-320..323).

When a push fails with a connection error or timeout (a primary refusing writes
in a failover, ``READONLY`` or ``NOREPLICAS``, is raised as one:
:class:`~wurk_django.redis.errors.PrimaryRefused`), its jobs go into a
bounded, process-local buffer and a background thread delivers them, oldest
first, as soon as Redis answers again. Every later push also tries to empty
the buffer first, keeping the order. A full buffer raises
:class:`PushBufferFull` at the call site (``RELIABLE_PUSH_OVERFLOW = "raise"``,
the default): jobs are refused loudly. With ``"drop_oldest"`` the buffer is a
ring instead: the oldest buffered jobs make room for the new ones, and every
job dropped that way is logged by jid at ERROR and sent with the
``pushes_dropped`` signal, never dropped without a word.

Buffering is on by default (``RELIABLE_PUSH``); :meth:`Client.reliable_push
<wurk_django.client.push.Client.reliable_push>` (Sidekiq Pro's name) turns it on in
code for the whole process, whatever the setting says, and may set the cap and
the overflow mode.

Limits, on purpose: the buffer lives in this process's memory (a crash loses
it), and a push whose reply was lost may have been applied, so a job can be
delivered twice (at-least-once). Jobs belonging to a batch (``bid``) are never
buffered: a push of them raises; in a push that mixes them with jobs of no
batch, those others are buffered and the push still raises.

A short-lived process (a management command, a cron script) may end while
jobs still wait. At interpreter exit the buffer is retried for up to
``RELIABLE_PUSH_EXIT_WAIT`` seconds; what is still undelivered then is saved
to the push spool (:mod:`wurk_django.client.push_spool`, ``RELIABLE_PUSH_SPOOL``),
one ERROR line naming the file, for the next process that pushes to the same
Redis or the next worker to push. When it cannot be saved, every job is
reported by jid at ERROR (on stderr when logging is not configured), and the
process exits with status ``EXIT_PUSHES_LOST`` (75, sysexits' "temporary
failure") whatever status it was leaving with, so a cron job or a CI step
sees the loss: never lost without a word. ``RELIABLE_PUSH = False`` makes
pushes raise instead. A process that runs no code at its end (``SIGKILL``)
loses what its buffer held.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import ssl
import sys
import threading
import time
from collections import deque
from typing import TYPE_CHECKING

import redis as redis_lib

from .. import signals
from ..errors import WurkError
from . import push_spool

if TYPE_CHECKING:
    from .writer import AsyncWriter, Command, Writer

logger = logging.getLogger("wurk_django.client.push")

FLUSH_INTERVAL = 2.0
EXIT_PUSHES_LOST = 75  # the exit status of a process that ends with pushes undelivered
TRANSIENT = (redis_lib.ConnectionError, redis_lib.TimeoutError)
RAISE, DROP_OLDEST = "raise", "drop_oldest"
OVERFLOW_MODES = (RAISE, DROP_OLDEST)

# Set by Client.reliable_push(): buffering on for this process, and its cap and mode when given.
_installed: dict[str, object] | None = None


def install(*, buffer: int | None = None, overflow: str | None = None) -> None:
    """Buffer pushes through Redis outages in this process, whatever ``RELIABLE_PUSH``
    says (see :meth:`wurk_django.client.push.Client.reliable_push`). ``buffer`` and
    ``overflow``, when given, win over ``RELIABLE_PUSH_BUFFER`` and
    ``RELIABLE_PUSH_OVERFLOW``. Calling it again with the same values changes nothing."""
    global _installed
    if buffer is not None and (isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1):
        raise ValueError(f"reliable_push(buffer=...) must be an integer >= 1, not {buffer!r}")
    if overflow is not None and overflow not in OVERFLOW_MODES:
        raise ValueError(f"reliable_push(overflow=...) must be one of {OVERFLOW_MODES}, not {overflow!r}")
    settings = dict(_installed or {})
    if buffer is not None:
        settings["buffer"] = buffer
    if overflow is not None:
        settings["overflow"] = overflow
    _installed = settings


def installed() -> bool:
    """Whether :func:`install` turned buffering on for this process."""
    return _installed is not None


def _uninstall() -> None:
    """Forget :func:`install` (for tests)."""
    global _installed
    _installed = None


def _capacity(config) -> int:
    return int((_installed or {}).get("buffer") or config.reliable_push_buffer)


def _overflow(config) -> str:
    return str((_installed or {}).get("overflow") or getattr(config, "reliable_push_overflow", RAISE))


class PushBufferFull(WurkError):
    """Redis is unreachable and the local push buffer is full. ``jobs`` are the jobs not
    accepted; a bulk push may have been accepted in part (the jobs before them fill the
    buffer's last room and are delivered once Redis answers)."""

    def __init__(self, capacity: int, jobs: list[dict], cause: BaseException) -> None:
        jids = ", ".join(str(j.get("jid")) for j in jobs[:5])
        super().__init__(
            f"Redis is unreachable ({cause}) and the push buffer is at its limit of "
            f"{capacity} job(s) (WURK['RELIABLE_PUSH_BUFFER']); refused job(s) {jids}"
        )
        self.jobs = jobs
        self.cause = cause


class PushBuffer:
    def __init__(self) -> None:
        # Each group is one push: (jobs, extra commands, front).
        self._groups: deque[tuple[list[dict], list[Command], bool]] = deque()
        self._count = 0
        self._lock = threading.Lock()
        self._flusher: threading.Thread | None = None
        self._wake = threading.Event()
        self._writer: Writer | None = None  # the last writer, for the delivery at exit
        self._sending: tuple | None = None  # the group a drain is writing now
        # One drain at a time: the pushing thread drains before its own push (order), and
        # the delivery thread every interval; two at once would both write the oldest group.
        self._draining = threading.Lock()

    def __len__(self) -> int:
        return self._count

    def add(self, writer: Writer, group: tuple[list[dict], list[Command], bool], cause: BaseException,
            *, wake: bool = False) -> None:
        """Queue ``group`` behind the buffered ones; ``wake`` asks the delivery thread to
        try at once instead of at its next interval. A group that does not fit fills the
        room left and raises :class:`PushBufferFull` naming the jobs it refused (a group
        with commands of its own goes whole or not at all), or, in the ``drop_oldest``
        mode, pushes the oldest buffered jobs out (logged by jid)."""
        jobs = group[0]
        capacity = _capacity(writer.config)
        dropped: list[dict] = []
        refused: list[dict] = []
        with self._lock:
            if self._count + len(jobs) > capacity:
                if _overflow(writer.config) != DROP_OLDEST:
                    # Fill the room left, then refuse the rest (one exception naming them).
                    # A group with commands of its own goes whole or not at all.
                    room = capacity - self._count
                    if group[1] or room <= 0:
                        raise PushBufferFull(capacity, jobs, cause) from cause
                    refused = jobs[room:]
                    group = (jobs[:room], group[1], group[2])
                    jobs = group[0]
                else:
                    dropped = self._make_room(len(jobs), capacity)
                    if self._count + len(jobs) > capacity:
                        # Alone bigger than the ring: its newest jobs are kept, unless it carries
                        # commands of its own (they belong with every one of its jobs).
                        room = capacity - self._count
                        if group[1] or room <= 0:
                            raise PushBufferFull(capacity, jobs, cause) from cause
                        dropped += jobs[:len(jobs) - room]
                        group = (jobs[len(jobs) - room:], group[1], group[2])
                        jobs = group[0]
            first = self._count == 0
            self._writer = writer
            self._groups.append(group)
            self._count += len(jobs)
            if self._flusher is None or not self._flusher.is_alive():
                self._flusher = threading.Thread(target=self._run, args=(writer,), name="wurk-push-buffer",
                                                 daemon=True)
                self._flusher.start()
        if dropped:
            _report_dropped(dropped, capacity)
        if wake:
            self._wake.set()
        if first:
            logger.warning("Redis unreachable or not a writable primary (%s): buffering pushes locally (up to %d jobs)",
                           cause, capacity)
        if refused:
            raise PushBufferFull(capacity, refused, cause) from cause

    def _make_room(self, need: int, capacity: int) -> list[dict]:
        """Drop the oldest buffered jobs until ``need`` more fit (the lock held); returns
        them. The group a delivery is sending right now is left alone: it may be
        arriving in Redis at this moment."""
        dropped: list[dict] = []
        index = 1 if self._groups and self._groups[0] is self._sending else 0
        while self._count + need > capacity and len(self._groups) > index:
            jobs, extra, front = self._groups[index]
            excess = self._count + need - capacity
            if not extra and len(jobs) > excess:
                self._groups[index] = (jobs[excess:], extra, front)
                dropped += jobs[:excess]
                self._count -= excess
            else:
                del self._groups[index]
                dropped += jobs
                self._count -= len(jobs)
        return dropped

    def drain(self, writer: Writer) -> bool:
        """Deliver buffered jobs oldest first; False if Redis is still unreachable. A
        second caller waits for the drain under way, then delivers what it left."""
        with self._draining:
            return self._drain(writer)

    def _drain(self, writer: Writer) -> bool:
        while True:
            with self._lock:
                if not self._groups:
                    return True
                group = self._sending = self._groups[0]
            jobs, extra, front = group
            try:
                # One connect attempt: the buffer is tried again soon anyway, and a push
                # waiting behind it must not sit through the back-off on every call.
                writer.write(jobs, extra=extra, front=front, connect_attempts=1)
            except TRANSIENT:
                return False
            finally:
                self._sending = None
            with self._lock:
                if self._groups and self._groups[0] is group:
                    self._groups.popleft()
                    self._count -= len(jobs)
                    if not self._groups:
                        logger.warning("Redis is back: buffered pushes delivered")
            _announce(jobs)

    def _run(self, writer: Writer) -> None:
        while self._count:
            self._wake.wait(FLUSH_INTERVAL)
            self._wake.clear()
            try:
                self.drain(writer)
            except Exception:
                logger.exception("delivering buffered pushes failed; will try again")


    def deliver_at_exit(self, wait: float) -> list[tuple[list[dict], list[Command], bool]]:
        """Try for ``wait`` seconds to deliver what is left; return the pushes that were
        not, and deliver nothing more: the caller saves them, and a delivery thread
        still running must not send one of them as well."""
        writer = self._writer
        if writer is None or not self._count:
            return []
        deadline = time.monotonic() + wait
        while True:
            try:
                if self.drain(writer):
                    return []
            except Exception:  # not only outages: whatever it is, report the jobs below
                logger.exception("delivering buffered pushes at exit failed")
            if time.monotonic() >= deadline:
                break
            time.sleep(min(0.5, max(deadline - time.monotonic(), 0)))
        self._draining.acquire()  # never released: this buffer delivers nothing more
        with self._lock:
            left = list(self._groups)
            self._groups.clear()
            self._count = 0
            return left


def _report_dropped(jobs: list[dict], capacity: int) -> None:
    for job in jobs:
        logger.error("job %s (%s, queue %s) DROPPED from the full push buffer (%d jobs, drop_oldest) while Redis "
                     "is unreachable", job.get("jid"), job.get("class"), job.get("queue"), capacity)
    signals.send(signals.pushes_dropped, "reliable_push", jobs=jobs)


def _announce(jobs: list[dict]) -> None:
    if not signals.pushes_recovered.receivers:
        return
    per_queue: dict[str, int] = {}
    for job in jobs:
        queue = str(job.get("queue") or "default")
        per_queue[queue] = per_queue.get(queue, 0) + 1
    for queue, count in per_queue.items():
        signals.send(signals.pushes_recovered, "reliable_push", queue=queue, count=count)



# One buffer per Redis (shard): a job waits for, and is delivered to, the server it was pushed to.
_buffers: dict[str, PushBuffer] = {}
_buffers_lock = threading.Lock()


def _buffer_for(writer: Writer | AsyncWriter) -> PushBuffer:
    key = writer.config.redis_target.identity
    buffer = _buffers.get(key)
    if buffer is None:
        with _buffers_lock:
            buffer = _buffers.setdefault(key, PushBuffer())
    return buffer


def _at_exit() -> int:
    """Deliver or report what is still buffered; returns how many jobs were lost."""
    lost = 0
    for buffer in list(_buffers.values()):  # one per Redis the process pushed to
        lost += _deliver_at_exit(buffer)
    return lost


def _exit_handler() -> None:
    if not _at_exit():
        return
    # An atexit handler cannot change the status the interpreter exits with; os._exit
    # can. It skips the handlers registered before this module was imported, so
    # logging and the standard streams are flushed here first.
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(EXIT_PUSHES_LOST)


def _deliver_at_exit(buffer: PushBuffer) -> int:
    if not len(buffer) or buffer._writer is None:
        return 0
    config = buffer._writer.config
    wait = float(getattr(config, "reliable_push_exit_wait", 5))
    logger.warning("process exiting with %d job(s) waiting for Redis; retrying for up to %gs", len(buffer), wait)
    left = buffer.deliver_at_exit(wait)
    if not left:
        return 0
    if push_spool.directory(config) is not None:
        try:
            path = push_spool.save(config, left)
        except Exception as exc:  # a full disk, a folder it may not use: reported as lost below
            logger.error("could not save the undelivered jobs to the push spool (%s)", exc)
        else:
            _report_spooled(config, left, path)
            return 0
    lost = [job for jobs, _extra, _front in left for job in jobs]
    for job in lost:
        logger.error("job %s (%s, queue %s) was NOT delivered: Redis stayed unreachable until this process exited",
                     job.get("jid"), job.get("class"), job.get("queue"))
    if lost:
        logger.error("%d pushed job(s) lost at exit (exit status %d); set WURK['RELIABLE_PUSH'] = False to make "
                     "pushes raise instead", len(lost), EXIT_PUSHES_LOST)
    return len(lost)


def _report_spooled(config, groups: list[tuple[list[dict], list[Command], bool]], path) -> None:
    jobs = [job for group in groups for job in group[0]]
    for job in jobs:
        logger.warning("job %s (%s, queue %s) saved to %s", job.get("jid"), job.get("class"), job.get("queue"), path)
    logger.error("%d job(s) not delivered before exit were saved to %s: Redis %s stayed unreachable. The next "
                 "process that pushes to it, or the next worker booting, with the same WURK['RELIABLE_PUSH_SPOOL'], "
                 "pushes them", len(jobs), path, push_spool.target_key(config))


atexit.register(_exit_handler)


def _reset_after_fork() -> None:
    # A child must not deliver the parent's jobs a second time (PRO-007).
    global _buffers
    _buffers = {}


def _refused(exc: BaseException) -> bool:
    """True for a failure waiting cannot cure: the server's TLS certificate was
    refused (a wrong CA or host name). Buffering would hide a misconfiguration
    behind jobs that are never delivered."""
    seen: BaseException | None = exc
    for _ in range(5):
        if seen is None:
            break
        if isinstance(seen, ssl.SSLCertVerificationError) or "CERTIFICATE_VERIFY_FAILED" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


os.register_at_fork(after_in_child=_reset_after_fork)


def buffered() -> int:
    """How many jobs are waiting for Redis in this process."""
    return sum(len(buffer) for buffer in list(_buffers.values()))


def deliver(writer: Writer, jobs: list[dict], *, extra: list[Command] | None = None, front: bool = False) -> None:
    """Write ``jobs`` through ``writer``, buffering them if Redis is unreachable."""
    group = (jobs, list(extra or ()), front)
    buffer = _buffer_for(writer)
    if push_spool.due(writer.config):  # the first push, then once a minute: pushes saved by exited processes
        push_spool.resume(writer.config)
    if len(buffer) and not buffer.drain(writer):
        # Still unreachable: behind the older ones, to keep the order.
        _buffer_or_raise(buffer, writer, group, redis_lib.ConnectionError("Redis is still unreachable"))
        return
    try:
        writer.write(jobs, extra=group[1], front=front)
    except TRANSIENT as exc:
        if _refused(exc):
            raise
        _buffer_or_raise(buffer, writer, group, exc)


async def adeliver(writer: AsyncWriter, jobs: list[dict], *, extra: list[Command] | None = None,
                   front: bool = False) -> None:
    """:func:`deliver` for ``async`` callers. While older pushes wait in the buffer this
    one queues behind them (the delivery thread keeps the order): draining here would
    block the event loop on synchronous I/O."""
    group = (jobs, list(extra or ()), front)
    buffer = _buffer_for(writer)
    if push_spool.due(writer.config) and push_spool.waiting(writer.config):
        # Its pushes are synchronous: off the event loop.
        await asyncio.to_thread(push_spool.resume, writer.config)
    if len(buffer):
        _buffer_or_raise(buffer, writer.sync(), group, redis_lib.ConnectionError("Redis is still unreachable"),
                         wake=True)
        return
    try:
        await writer.write(jobs, extra=group[1], front=front)
    except TRANSIENT as exc:
        if _refused(exc):
            raise
        _buffer_or_raise(buffer, writer.sync(), group, exc)


def _buffer_or_raise(buffer: PushBuffer, writer: Writer, group: tuple[list[dict], list[Command], bool],
                     cause: BaseException, *, wake: bool = False) -> None:
    """Buffer ``group``; a job of a batch (``bid``) is never buffered: its push raises
    ``cause``, after buffering the jobs of the same push that belong to no batch."""
    jobs, extra, front = group
    unbatched = [job for job in jobs if "bid" not in job]
    if len(unbatched) == len(jobs):
        buffer.add(writer, group, cause, wake=wake)
        return
    if unbatched and not extra:  # commands sent with a push belong to all of its jobs
        buffer.add(writer, (unbatched, [], front), cause, wake=wake)
    raise cause
