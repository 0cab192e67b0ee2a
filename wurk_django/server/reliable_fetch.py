"""Reliable fetch, the default fetcher: no job is lost to a crash (PRO-100..135, RUN-130..132).

A job moves atomically from ``queue:<q>`` into one of this process's private
lists ``queue:<q>|<host>|<pid>|<nonce>|<slot>`` (``LMOVE``), and leaves it only
when it is acknowledged (``LREM`` of the exact bytes). If the process dies, the
reaper finds its private lists and moves their jobs back.

Each processor thread fetches into a list of its own (``<slot>``: 0, 1, ... per
thread, reused when a thread exits), so an ACK's ``LREM`` searches that thread's
few jobs, not every thread's: with one shared list the job sat anywhere among
concurrency x PREFETCH entries, and the search was the dearest command Redis ran
for a job. The reaper reads every slot the same way, since it keys on the owner.

The ACK costs no round trip of its own: it is parked per thread and sent in
the same pipeline as that thread's next ``LMOVE`` (at most 3 commands and 1 round
trip per job on a busy queue). Parked ACKs are flushed before blocking, when quieting,
when a processor exits and first thing in ``bulk_requeue``.

Fetching ahead: when a thread's last fetches all hit and its jobs are short, its
next round trip carries several ``LMOVE``s instead of one: about 20 ms of its
recent jobs, up to ``PREFETCH``. The extra jobs
are in the private list like any fetched job (a crash loses none: the reaper
moves them back), and the same thread runs them next without a round trip; their
ACKs ride its next fetch. On a busy queue of 1 ms jobs that makes a round trip
per 16 jobs, with an LMOVE and an LREM per job and one DEL for all 16 poison
counters. A thread that stops hands back the jobs it fetched ahead, unrun.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from collections import Counter, deque
from typing import Any

import redis as redis_lib

from .. import keys
from ..conf import Config
from ..connection import get_redis, send_commands, send_on
from ..keys import wake as wake_key
from ..pause import PausedCache
from ..scripts import lua
from ..writer import Writer
from .outage import OutageLog
from .queues import QueueOrder
from .state import NONCE, hostname

logger = logging.getLogger("wurk_django.worker")

ERROR_BACKOFF = 1.0
FETCH_FIRST = lua("fetch_first")
#: Most jobs one fetch moves when the queue is deep and the jobs are short.
PREFETCH = 16
#: Consecutive fetches that all hit before a thread fetches ahead.
PREFETCH_AFTER = 2
#: A thread fetches ahead only while its jobs take less than this (seconds, fetch to
#: fetch): a job fetched ahead waits for the ones before it on the same thread.
PREFETCH_MAX_GAP = 0.05
#: How much work a thread fetches ahead of itself, in seconds of its recent jobs: 16
#: jobs of 1 ms, 4 of 5 ms, 2 of 20 ms. It bounds how long a job fetched ahead can
#: wait behind the others while another thread might be free.
PREFETCH_AHEAD = 0.02


def private_list(queue: str, pid: int | None = None, slot: int = 0) -> str:
    """``queue:<q>|<host>|<pid>|<nonce>|<slot>`` (PRO-110)."""
    return keys.private_queue(queue, hostname(), pid or os.getpid(), NONCE, slot)


class ReliableUnit:
    __slots__ = ("queue", "queue_key", "private", "job", "fetcher", "jid")

    def __init__(self, queue: str, queue_key: str, private: str, job: bytes, fetcher: ReliableFetch) -> None:
        self.queue = queue
        self.queue_key = queue_key
        self.private = private
        self.job = job  # the exact bytes LMOVE returned (PRO-002)
        self.fetcher = fetcher
        self.jid: str | None = None

    def acknowledge(self) -> None:
        """Park the ACK; it rides this thread's next fetch (PRO-131)."""
        self.fetcher.park(self)

    def requeue(self) -> None:
        """Back to the fetch end of its queue, only if still ours (PRO-135)."""
        Writer(self.fetcher.config).send([requeue_command(self.private, self.queue_key, self.job)])


def requeue_command(private: str, public: str, raw: bytes) -> tuple[Any, ...]:
    """Move ``raw`` from ``private`` back to the fetch end of ``public``, only if it is
    still there. Putting a fetched job back is not an enqueue: it goes through the
    write policy (:meth:`Writer.send`) but write hooks never see it, so a feature does
    not count the same job twice."""
    return lua("reliable_requeue").command(keys=[private, public], args=[raw])


def _ack_commands(units: list[ReliableUnit]) -> list[tuple[Any, ...]]:
    """LREM each job from its private list, then one DEL of their poison counters (PRO-130, PRO-155)."""
    commands: list[tuple[Any, ...]] = []
    counters: list[str] = []
    for unit in units:
        # Searched from the tail: the fetch pushes onto the head, so the job finishing now is
        # among the oldest entries of its thread's list (at its tail when the thread ACKs in
        # the order it fetched).
        commands.append(("LREM", unit.private, -1, unit.job))
        if isinstance(unit.jid, str) and unit.jid:  # never DEL the bare prefix (PRO-155)
            counters.append(keys.recovered(unit.jid))
    if counters:
        # One command for every counter: Redis pays its per-command cost once, not per job.
        commands.append(("DEL", *counters))
    return commands


class ReliableFetch:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.order = QueueOrder(config.queues)
        self._concurrency = config.concurrency
        self.poll_interval = float(config.fetch_poll_interval)
        self._keys: dict[tuple[str, int], tuple[str, str]] = {}
        self._keys_pid = 0
        # Private-list slots: each fetching thread holds one (thread-local), the lowest free
        # first, so a process keeps about as many lists per queue as it has threads.
        self._slot_lock = threading.Lock()
        self._slots_free: list[int] = []
        self._slots_made = 0  # slots 0 .. _slots_made - 1 have been handed out (in _slots_pid)
        self._slots_pid = os.getpid()
        self._wake_keys: dict[str, str] = {}
        self._held: dict[int, list[ReliableUnit]] = {}
        self._held_lock = threading.Lock()
        self._paused = PausedCache(config)
        self._done = threading.Event()
        self._active: dict[int, ReliableUnit] = {}  # thread -> the job it is running
        self._ahead: dict[int, deque[ReliableUnit]] = {}  # thread -> jobs it fetched ahead, in order
        # thread -> (full fetches in a row, time of the last fetch, jobs it brought)
        self._streak: dict[int, tuple[int, float, int]] = {}
        self._local = threading.local()
        # Fetches hold the plain lock for two counter updates per job; the Condition on the
        # same lock is only waited on and notified while a reconcile is under way.
        self._gate_lock = threading.Lock()
        self._gate = threading.Condition(self._gate_lock)
        self._in_fetch = 0
        self._reconciling = False
        self._needs_reconcile = False
        self._outage = OutageLog("fetch", f", retrying every {ERROR_BACKOFF:g}s (parked ACKs are kept)")

    # -- keys -------------------------------------------------------------

    def keys(self, name: str, slot: int | None = None) -> tuple[str, str]:
        """(public, private) for a queue, in the calling thread's slot unless ``slot`` is
        given; rebuilt when the pid changes (PRO-111)."""
        pid = os.getpid()
        if pid != self._keys_pid:
            self._keys = {}
            self._keys_pid = pid
        if slot is None:
            slot = self._slot(pid)
        found = self._keys.get((name, slot))
        if found is None:
            found = self._keys[(name, slot)] = (keys.queue(name), private_list(name, pid, slot))
        return found

    def _slot(self, pid: int | None = None) -> int:
        """The calling thread's private-list slot, taken on its first fetch (``pid``: the
        caller's ``os.getpid()``, when it has it already)."""
        local = self._local
        pid = pid or os.getpid()
        if getattr(local, "slot_pid", None) == pid:
            return local.slot
        with self._slot_lock:
            if self._slots_pid != pid:
                # Forked: the parent's threads are not here, and its lists carry its pid.
                self._slots_free, self._slots_made, self._slots_pid = [], 0, pid
            if self._slots_free:
                slot = heapq.heappop(self._slots_free)
            else:
                slot = self._slots_made
                self._slots_made += 1
        local.slot, local.slot_pid = slot, pid
        return slot

    def _release_slot(self) -> None:
        local = self._local
        if getattr(local, "slot_pid", None) != os.getpid():
            return
        with self._slot_lock:
            heapq.heappush(self._slots_free, local.slot)
        local.slot_pid = None

    def all_keys(self) -> list[tuple[str, str]]:
        """(public, private) of every private list this process may hold jobs in: each
        queue, in each slot handed out so far."""
        return [self.keys(name, slot) for slot in range(max(self._slots_made, 1)) for name in self.order.names]

    def private_lists(self) -> list[str]:
        return [private for _, private in self.all_keys()]

    # -- ACKs -------------------------------------------------------------

    def park(self, unit: ReliableUnit) -> None:
        ident = threading.get_ident()
        with self._held_lock:
            self._held.setdefault(ident, []).append(unit)

    def _take_mine(self) -> list[ReliableUnit]:
        with self._held_lock:
            return self._held.pop(threading.get_ident(), [])

    def _put_back(self, ident: int, units: list[ReliableUnit]) -> None:
        with self._held_lock:
            self._held[ident] = units + self._held.get(ident, [])

    def flush_acks(self) -> None:
        """Send every parked ACK in one pipeline; on failure put them back and raise (PRO-132)."""
        with self._held_lock:
            taken, self._held = self._held, {}
        if not any(taken.values()):
            return
        try:
            send_commands(get_redis(config=self.config), _ack_commands([u for units in taken.values() for u in units]))
        except Exception:
            for ident, units in taken.items():
                self._put_back(ident, units)
            raise

    def _flush_quietly(self) -> None:
        try:
            self.flush_acks()
        except redis_lib.RedisError as exc:
            self._outage.failed(exc)

    # -- the per-thread connection for fetch + ACK ---------------------------

    def _thread_connection(self) -> Any:
        """A connection each processor thread keeps for its fetch batches.

        Taken from a pool of its own (concurrency + 2), so jobs' own Redis calls never
        wait for a connection a fetcher holds; rebuilt after a fork.
        """
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is None or local.pid != os.getpid():
            local.pool = get_redis("ack", config=self.config).connection_pool
            conn = local.conn = local.pool.get_connection()
            local.pid = os.getpid()
        return conn

    def release_thread_connection(self) -> None:
        """Give the calling thread's connection back (the processor is exiting), the
        jobs it fetched ahead back to their queues, and its slot to the next thread. A job
        left in the slot's list stays owned by this process: its unit names the list."""
        ident = threading.get_ident()
        self.give_back_ahead(ident)
        self._streak.pop(ident, None)
        self._release_slot()
        local = self._local
        conn = getattr(local, "conn", None)
        if conn is not None and local.pid == os.getpid():
            local.pool.release(conn)
        local.conn = None

    # -- fetching ---------------------------------------------------------

    def _names(self) -> list[str]:
        names = self.order()
        paused = self._paused.get()
        return [n for n in names if n not in paused] if paused else names

    def retrieve_work(self) -> ReliableUnit | None:
        ident = threading.get_ident()
        self._active.pop(ident, None)  # this thread's previous job is parked or requeued by now
        if self._done.is_set():
            self.give_back_ahead(ident)
            self._flush_quietly()
            time.sleep(0.05)
            return None
        with self._gate_lock:
            while self._reconciling:
                self._gate.wait(0.5)
            self._in_fetch += 1
        try:
            ahead = self._ahead.get(ident)
            if ahead:
                # Registered as active before it leaves the queue of fetched-ahead jobs, so a
                # reconcile (which waits for fetches to end anyway) always sees it somewhere.
                unit = self._active[ident] = ahead[0]
                ahead.popleft()
                return unit
            unit = self._walk()
            if unit is not None:
                self._active[ident] = unit  # registered before leaving the fetch, for _reconcile
        except redis_lib.RedisError as exc:
            # The reply may be lost after LMOVE ran: the job would then sit in our private
            # list with no thread on it, and the reaper never looks at a live owner's lists.
            self._needs_reconcile = True
            self._outage.failed(exc)
            self._done.wait(ERROR_BACKOFF)
            return None
        finally:
            with self._gate_lock:
                self._in_fetch -= 1
                if self._reconciling:
                    self._gate.notify_all()
        if self._needs_reconcile:
            self._reconcile()
        self._outage.succeeded()
        return unit

    def give_back_ahead(self, ident: int | None = None) -> int:
        """Requeue, unrun, the jobs a thread (all threads: ``ident=None``) fetched ahead."""
        with self._gate_lock:
            idents = list(self._ahead) if ident is None else [ident]
            taken = [u for i in idents for u in self._ahead.pop(i, ())]
        if not taken:
            return 0
        try:
            moved = sum(int(r or 0) for r in Writer(self.config).send(
                [requeue_command(u.private, u.queue_key, u.job) for u in taken]))
        except redis_lib.RedisError as exc:
            logger.warning("could not hand back %d job(s) fetched ahead (%s); the reaper will", len(taken), exc)
            return 0
        return moved

    def _reconcile(self) -> None:
        """After a fetch error, give back jobs in our private lists that no thread holds.

        Fetching stops while it runs (at most one blocking fetch long), so every job
        moved in by a fetch is either registered as active or still parked for its ACK;
        anything else was moved by a command whose reply never arrived.
        """
        with self._gate:
            if self._reconciling or not self._needs_reconcile:
                return
            self._reconciling = True
            deadline = time.monotonic() + self.poll_interval + 3
            while self._in_fetch and time.monotonic() < deadline:
                self._gate.wait(0.1)
            quiet = not self._in_fetch
        try:
            if not quiet:
                return  # a fetch is stuck; try again after the next one
            # Active before parked: a thread parks its finished job before it drops it from
            # _active, so reading in this order cannot miss a job moving between the two.
            ahead = [unit.job for units in list(self._ahead.values()) for unit in list(units)]
            active = [unit.job for unit in list(self._active.values())]
            with self._held_lock:
                held = [unit.job for units in self._held.values() for unit in units]
            known = Counter(ahead) + Counter(active) + Counter(held)
            redis = get_redis(config=self.config)
            writer = Writer(self.config, redis)
            given_back = 0
            for public, private in self.all_keys():
                for raw in redis.lrange(private, 0, -1):
                    if known[raw] > 0:
                        known[raw] -= 1
                        continue
                    given_back += int(writer.send([requeue_command(private, public, raw)])[0] or 0)
            self._needs_reconcile = False
            if given_back:
                logger.warning("gave back %d job(s) fetched by commands whose replies were lost", given_back)
        except redis_lib.RedisError as exc:
            self._outage.failed(exc)
        finally:
            with self._gate:
                self._reconciling = False
                self._gate.notify_all()

    def _walk(self) -> ReliableUnit | None:
        names = self._names()
        if not names:
            self.flush_acks()
            self._done.wait(self.poll_interval)
            return None
        mine = self._take_mine()
        ident = threading.get_ident()
        for i, name in enumerate(names):
            public, private = self.keys(name)
            if i == 0:
                # The held ACKs ride the first LMOVE: one round trip per job at most (RUN-701),
                # on this thread's own connection (no pool checkout per job).
                count = self._fetch_count(ident)
                move = ("LMOVE", public, private, "RIGHT", "LEFT")
                try:
                    replies = send_on(self._thread_connection(), [*_ack_commands(mine), *(move,) * count])
                except Exception:
                    self._put_back(ident, mine)
                    raise
                units = [ReliableUnit(name, public, private, job, self) for job in replies[-count:] if job is not None]
                self._fetched(ident, count, len(units))
                if units:
                    if len(units) > 1:
                        self._ahead.setdefault(ident, deque()).extend(units[1:])
                    return units[0]
                continue
            # The rest of the queues in one round trip, in order (PRO-122).
            rest = names[i:]
            pairs = [key for other in rest for key in self.keys(other)]
            hit = FETCH_FIRST(get_redis(config=self.config), keys=pairs)
            if hit:
                name = rest[int(hit[0]) - 1]
                public, private = self.keys(name)
                return ReliableUnit(name, public, private, hit[1], self)
            break
        if self._done.is_set():
            return None
        blocking = get_redis("fetch", block_seconds=self.poll_interval, config=self.config)
        if len(names) == 1:
            # One queue: block on the queue itself, so any push (a Ruby client's too) is
            # moved into the private list the moment it lands.
            public, private = self.keys(names[0])
            job = blocking.blmove(public, private, self.poll_interval, "RIGHT", "LEFT")
            if job is None:
                return None
            return ReliableUnit(names[0], public, private, job, self)
        # Several queues: no blocking move takes from more than one list, so wait on the
        # queues' wake-up lists, which every push through the Writer feeds in the same
        # round trip, and walk again once woken. Pushes that send no wake-up (Ruby
        # clients, the reaper) are found by the next walk, one poll interval later at most.
        self._wait_for_wakeup(blocking, names)
        return None

    def _fetch_count(self, ident: int) -> int:
        """How many jobs this thread's next fetch moves: once its last ``PREFETCH_AFTER``
        fetches all hit, with short jobs in between, about ``PREFETCH_AHEAD`` seconds
        of its jobs (at least 2, at most ``PREFETCH``); else one."""
        streak, last, brought = self._streak.get(ident, (0, 0.0, 1))
        if streak < PREFETCH_AFTER:
            return 1
        # The jobs of the last fetch have all run since: their time, per job.
        per_job = (time.monotonic() - last) / brought
        if per_job >= PREFETCH_MAX_GAP:
            return 1
        return min(PREFETCH, max(2, round(PREFETCH_AHEAD / max(per_job, 1e-6))))

    def _fetched(self, ident: int, wanted: int, got: int) -> None:
        streak, last, brought = self._streak.get(ident, (0, 0.0, 1))
        now = time.monotonic()
        # Short jobs: the time since the last fetch, per job that fetch brought, is under the limit.
        full = got == wanted and (now - last) / brought < PREFETCH_MAX_GAP
        self._streak[ident] = (streak + 1 if full else 0, now, max(got, 1))

    def _wait_for_wakeup(self, blocking: redis_lib.Redis, names: list[str]) -> bool:
        """Block up to the poll interval on the wake-up lists of ``names``; True if woken."""
        cache = self._wake_keys
        wakes = [cache.get(name) or cache.setdefault(name, wake_key(name)) for name in names]
        return blocking.blpop(wakes, timeout=self.poll_interval) is not None

    def terminate(self) -> None:
        """No more work; flush parked ACKs (errors reported, not raised) (PRO-134)."""
        self._done.set()
        self._flush_quietly()

    def bulk_requeue(self, units: list[ReliableUnit]) -> None:
        """Hard shutdown: ACKs first, then each in-flight job back atomically (PRO-135, RUN-203),
        and the jobs fetched ahead (never started)."""
        try:
            self.flush_acks()
        except redis_lib.RedisError:
            # A finished job would be requeued and re-run; leave everything to the reaper instead.
            logger.exception("could not flush ACKs; in-flight jobs stay in private lists for the reaper")
            return
        self.give_back_ahead()
        if not units:
            return
        commands = [requeue_command(unit.private, unit.queue_key, unit.job) for unit in units]
        try:
            moved = sum(int(r or 0) for r in Writer(self.config).send(commands))
            logger.info("pushed %d in-flight job(s) back to their queues", moved)
        except redis_lib.RedisError:
            logger.exception("could not requeue %d in-flight job(s); the reaper will recover them", len(units))
