"""Reliable fetch, the default fetcher: no job is lost to a crash (PRO-100..135, RUN-130..132).

A job moves atomically from ``queue:<q>`` into one of this process's private
lists ``queue:<q>|<host>|<pid>|<nonce>|<slot>`` (``LMOVE``), and leaves it only
when it is acknowledged (``LREM`` of the exact bytes). If the process dies, the
reaper finds its private lists and moves their jobs back.

Each processor thread holds a fetch slot (:mod:`.fetch_slot`) with lists of its
own (``<slot>``: 0, 1, ... per thread, the lowest free first, reused when a
thread exits), so an ACK's ``LREM`` searches that thread's few jobs, not every
thread's: with one shared list the job sat anywhere among concurrency x PREFETCH
entries, and the search was the dearest command Redis ran for a job. The reaper
reads every slot the same way, since it keys on the owner.

The slot owns everything a fetch touches per job (its lists, its connection,
its jobs fetched ahead, its parked ACKs), so the hot path takes no lock. This
class coordinates only what the threads share: numbering the slots, the queue
order and pauses, the wake-ups of idle threads, and the reconcile after a
lost reply.

The ACK costs no round trip of its own: it is parked in its slot and sent in
the same pipeline as that slot's next ``LMOVE`` (at most 3 commands and 1 round
trip per job on a busy queue). Parked ACKs are flushed before blocking, when
quieting, when a processor exits and first thing in ``bulk_requeue``.

Fetching ahead: when a thread's last fetches all hit and its jobs are short, its
next round trip carries several ``LMOVE``s instead of one: about 20 ms of its
recent jobs, up to ``fetch_slot.PREFETCH``. The extra jobs
are in the private list like any fetched job (a crash loses none: the reaper
moves them back), and the same thread runs them next without a round trip; their
ACKs ride its next fetch. On a busy queue of 1 ms jobs that makes a round trip
per 16 jobs, with an LMOVE and an LREM per job and one DEL for all 16 poison
counters. A batch of jobs that use a millisecond of processor time or more also
carries an LLEN, which places each job for the "running" marker it writes as
it starts; a batch of cheaper jobs is marked as a whole instead (slot.py,
``QUICK``). A thread that stops hands back the jobs it fetched ahead, unrun, and
so does a thread whose current job outlives a few milliseconds, or that holds
jobs of a queue paused since (fair.py): no job waits behind a long one.
``FETCH_SIZE`` caps how many jobs one fetch moves.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import redis as redis_lib

from ... import keys, wake_demand
from ...client.writer import Writer
from ...conf import Config
from ...keys import wake as wake_key
from ...pause import PausedCache
from ...queue_limits import caps as queue_caps
from ...redis import blocked
from ...redis.connection import get_redis, send_commands, send_on
from ...redis.scripts import lua
from ..outage import OutageLog
from ..state import NONCE, hostname
from .fair import AheadWatch
from .memory_limit import FETCH_AT_LIMIT, MemoryLimit
from .one_blocker import OneBlocker
from .push_watch import QUIET_POLLS, PushWatch
from .queues import QueueOrder
from .slot import FetchSlot, ReliableUnit, ack_commands, requeue_command, tail_mark

logger = logging.getLogger("wurk_django.worker")

ERROR_BACKOFF = 1.0
FETCH_FIRST = lua("fetch_first")
HAND_BACK = lua("hand_back_ahead")


def private_list(queue: str, pid: int | None = None, slot: int = 0) -> str:
    """``queue:<q>|<host>|<pid>|<nonce>|<slot>`` (PRO-110)."""
    return keys.private_queue(queue, hostname(), pid or os.getpid(), NONCE, slot)


class _Holder:
    """Lives in a thread's local values as long as the thread holds its slot."""

    __slots__ = ("__weakref__",)


def _free_slot(fetcher: weakref.ref[ReliableFetch], slot: FetchSlot) -> None:
    coordinator = fetcher()
    if coordinator is not None:
        coordinator._put_free(slot)


class ReliableFetch:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.order = QueueOrder(config.queues)
        self.poll_interval = float(config.fetch_poll_interval)
        self._paused = PausedCache(config)
        self._done = threading.Event()
        # Redis's notice of any client's write to a queue, for idle threads serving several
        # (or one, in a fetcher of one thread).
        self._watch = PushWatch(config, on_paused=self._paused.expire) if config.fetch_notifications else None
        self._one_blocker = OneBlocker(config.concurrency)
        # A fetcher of one thread watches a single queue too rather than block on it: the
        # blocking move holds a connection of its own, and with the watch an idle -c 1
        # worker holds two in all (the subscription and its pool's one), as Sidekiq does.
        # With more threads one blocker serves them all, and a moved job costs no notice.
        self._watch_single = int(config.concurrency) <= 1
        self._wake_keys: dict[str, str] = {}
        # Keeps the marker that makes pushes write wake-up tokens set while threads wait on them.
        self._wake_demand = wake_demand.Advertiser(lambda: get_redis(config=self.config))
        self._outage = OutageLog("fetch", f", retrying every {ERROR_BACKOFF:g}s (parked ACKs are kept)")
        self._limit = MemoryLimit()
        # The slots: each fetching thread holds one (in _local), the lowest free first, so a
        # process keeps about as many lists per queue as it has threads. The lock guards
        # the numbering only: a thread takes it when it gets or frees its slot, never per job.
        self._local = threading.local()
        self._lock = threading.Lock()
        self._slots: list[FetchSlot] = []  # every slot handed out in _pid, by number
        self._free: list[int] = []  # numbers of the slots no thread holds (a heap)
        self._pid = os.getpid()
        # Slot numbers, which name the private lists and "running" markers: 0, 1, 2...
        # for a process of one capsule; with several, capsule i of n numbers its slots
        # i, i+n, i+2n..., so no two capsules of a process ever share a list or a marker.
        place = config.capsule
        self._first, self._step = (place.index, place.count) if place is not None else (0, 1)
        # Bumped whenever a job may sit in a private list with no slot holding it; each
        # slot checks its lists once when it sees a generation it has not checked.
        self._generation = 0
        # Hands back the jobs a slot holds behind a long job, or of a paused queue (fair.py).
        self._fair = AheadWatch(lambda: self._slots, self.hand_back, self._paused.get, self._done, config)
        # Queue limits (issue 47 item 4): None unless a queue this fetcher serves is capped,
        # and then every fetch below is the one it was without them.
        limits = getattr(config, "queue_limits", None)
        self._caps = (queue_caps.QueueCaps(limits, self.order.names) or None) if limits else None

    # -- slots ------------------------------------------------------------

    def _mine(self) -> FetchSlot:
        """The calling thread's slot, taken on its first fetch."""
        slot = getattr(self._local, "slot", None)
        if slot is None or slot.pid != os.getpid():
            slot = self._take_slot()
        return slot

    def _take_slot(self) -> FetchSlot:
        pid = os.getpid()
        with self._lock:
            if self._pid != pid:
                # Forked: the parent's threads are not here, and its lists carry its pid.
                self._slots, self._free, self._pid = [], [], pid
            if self._free:
                slot = self._slots[self._position(heapq.heappop(self._free))]
            else:
                slot = FetchSlot(self._number(len(self._slots)), pid, self.config, self._generation)
                self._slots.append(slot)
        # The slot is freed when the thread releases it, or else when the thread ends
        # (its thread-local values go, and with them the holder): a thread that died
        # without releasing does not keep a slot forever. Its jobs fetched ahead and
        # parked ACKs stay in the slot, for the next thread to run and send.
        holder = _Holder()
        free = weakref.finalize(holder, _free_slot, weakref.ref(self), slot)
        free.atexit = False
        slot.free = free
        local = self._local
        local.slot, local.holder, local.free = slot, holder, free
        return slot

    def _put_free(self, slot: FetchSlot) -> None:
        with self._lock:
            if slot.pid == self._pid and slot.number not in self._free:
                heapq.heappush(self._free, slot.number)

    @contextmanager
    def _free_slots(self, wanted: Callable[[FetchSlot], bool]) -> Iterator[list[FetchSlot]]:
        """The free slots ``wanted`` picks, taken out of the free ones meanwhile: no
        thread is given one while it is worked on here, so its state has one user at a
        time, like a held slot's."""
        pid = os.getpid()
        with self._lock:
            taken = ([self._slots[self._position(n)] for n in self._free if wanted(self._slots[self._position(n)])]
                     if self._pid == pid else [])
            if taken:
                numbers = {slot.number for slot in taken}
                self._free = [n for n in self._free if n not in numbers]
                heapq.heapify(self._free)
        try:
            yield taken
        finally:
            if taken:
                with self._lock:
                    if self._pid == pid:
                        for slot in taken:
                            heapq.heappush(self._free, slot.number)

    def _number(self, position: int) -> int:
        """The number of the slot at ``position`` in ``_slots``."""
        return self._first + position * self._step

    def _position(self, number: int) -> int:
        return (number - self._first) // self._step

    def release_thread_connection(self) -> None:
        """The processor is exiting: hand the jobs its slot fetched ahead back to their
        queues, its connection back to the pool, and the slot to the next thread. A job
        left in the slot's lists stays owned by this process: its unit names the list,
        and ACKs still parked there ride the next holder's first fetch."""
        local = self._local
        slot, holder, free = (getattr(local, name, None) for name in ("slot", "holder", "free"))
        local.slot = local.holder = local.free = None
        if slot is None or slot.pid != os.getpid():
            return
        if free is not None and not free.alive:
            return  # taken back when this thread was abandoned: another thread may hold it now
        slot.free = None
        self._give_back_ahead([slot])
        slot.clear_mark()
        slot.release_connection()
        slot.forget_pace()
        if free is not None:
            free()  # only now: while ``holder`` lives, no other thread can be given the slot
        del holder

    def all_keys(self) -> list[tuple[str, str]]:
        """(public, private) of every private list this process may hold jobs in: each
        queue, in each slot handed out so far."""
        made = len(self._slots) if self._pid == os.getpid() else 0
        return [(keys.queue(name), private_list(name, slot=self._number(position)))
                for position in range(max(made, 1)) for name in self.order.names]

    def private_lists(self) -> list[str]:
        return [private for _, private in self.all_keys()]

    def in_hand(self) -> int:
        """Jobs fetched ahead that no thread has started yet: off their queue, so a check
        for "nothing left to do" (``--burst``) must count them too."""
        slots = list(self._slots) if self._pid == os.getpid() else []
        return sum(len(slot.ahead) for slot in slots)

    # -- ACKs -------------------------------------------------------------

    def _flush(self, slots: list[FetchSlot]) -> None:
        """Send the ACKs parked in ``slots`` in one pipeline; on failure park them again and
        raise (PRO-132)."""
        taken = [(slot, slot.take_parked()) for slot in slots if slot.parked]
        units = [unit for _, parked in taken for unit in parked]
        if not units:
            return
        try:
            send_commands(get_redis(config=self.config), ack_commands(units))
        except Exception:
            for slot, parked in taken:
                slot.put_back(parked)
            raise

    def flush_acks(self) -> None:
        """Send the ACKs parked by the calling thread, and any left in free slots by
        threads that exited, in one pipeline; on failure keep them and raise (PRO-132).
        Other threads send theirs with their next fetch, or before they block."""
        slot = getattr(self._local, "slot", None)
        mine = [slot] if slot is not None and slot.pid == os.getpid() else []
        with self._free_slots(lambda free: bool(free.parked)) as free:
            self._flush(mine + free)

    def _flush_quietly(self) -> None:
        try:
            self.flush_acks()
        except redis_lib.RedisError as exc:
            self._outage.failed(exc)

    # -- fetching ---------------------------------------------------------

    def _names(self) -> list[str]:
        names = self.order()
        paused = self._paused.get()
        return [n for n in names if n not in paused] if paused else names

    def retrieve_work(self) -> ReliableUnit | None:
        slot = getattr(self._local, "slot", None)
        if slot is None or slot.pid != os.getpid():
            slot = self._take_slot()
        if self._done.is_set():
            self._give_back_ahead([slot])
            self._flush_quietly()
            time.sleep(0.05)
            return None
        try:
            holding = self._limit.holding()
            if slot.reconciled != self._generation and not self._limit.full():
                # Not while Redis is full: a job left in the private list because its failure
                # could not be recorded would be fetched and fail again at once. It waits.
                self._reconcile(slot)
            if slot.ahead:
                slot.started = time.monotonic()  # before the take: the rest are behind this job now
                unit = slot.next_ahead()
                if unit is not None:
                    slot.mark_started(unit)
                    return unit
            slot.wait_for_hand_back()
            if holding:
                return self._fetch_at_limit(slot)
            unit = self._walk(slot)
        except redis_lib.OutOfMemoryError:
            # Redis is at its maxmemory limit and refused a move: fetch through the
            # allow-oom script instead, so the queues keep draining and memory frees.
            self._limit.refused(get_redis(config=self.config))
            return self._fetch_at_limit(slot)
        except redis_lib.RedisError as exc:
            # The reply may be lost after LMOVE ran: the job would then sit in our private
            # list with no thread on it, and the reaper never looks at a live owner's lists.
            self._stale()
            self._outage.failed(exc)
            self._done.wait(ERROR_BACKOFF)
            return None
        self._outage.succeeded()
        self._limit.plain_fetch_worked()
        return unit

    def _fetch_at_limit(self, slot: FetchSlot) -> ReliableUnit | None:
        """One fetch while Redis is full: parked ACKs first (``LREM`` is accepted at the
        limit and frees memory), then the allow-oom move of the first job of the first
        non-empty queue, into this slot's private list as always. A capped queue waits
        meanwhile: taking its slot would write to a full Redis."""
        names = self._names()
        if self._caps is not None:
            names = [name for name in names if not self._caps.capped(name)]
        try:
            self._flush([slot])
            if not names:
                self._done.wait(self.poll_interval)
                return None
            pairs = [key for name in names for key in slot.keys(name)]
            hit = FETCH_AT_LIMIT(get_redis(config=self.config), keys=pairs)
        except (redis_lib.ConnectionError, redis_lib.TimeoutError) as exc:
            self._stale()
            self._outage.failed(exc)
            self._done.wait(ERROR_BACKOFF)
            return None
        except redis_lib.RedisError as exc:
            self._limit.cannot_fetch(exc)
            self._done.wait(ERROR_BACKOFF)
            return None
        self._outage.succeeded()
        if not hit:
            # Nothing queued; a blocking move would be refused too, so look again shortly.
            self._done.wait(min(self.poll_interval, 1.0))
            return None
        name = names[int(hit[0]) - 1]
        public, private = slot.keys(name)
        return ReliableUnit(name, public, private, hit[1], slot)

    def _walk(self, slot: FetchSlot) -> ReliableUnit | None:
        names = self._names()
        if not names:
            self._flush([slot])
            slot.release_connection()
            self._done.wait(self.poll_interval)
            return None
        caps = self._caps
        if len(names) == 1 and not slot.parked and not slot.ahead and slot.marks_oldest() \
                and not self._watches(names) and (caps is None or not caps.capped(names[0])):
            # One queue and nothing to send with a move (no ACK, no mark): the blocking move
            # returns at once when the queue holds a job, so the walk's LMOVE would only
            # repeat it. An idle process then sends one command per poll interval, not two.
            if self._one_blocker.try_block():
                return self._block_on(slot, names[0])
            # Another thread is blocked on this very queue and takes whatever is pushed
            # to it, so a look of this thread's own would find nothing: it waits for its
            # turn, without a command, a connection or a redial (25 idle threads used to
            # walk all at once every QUIET_POLLS intervals, each on a connection).
            self._one_blocker.wait(self.poll_interval * QUIET_POLLS)
            return None
        for i, name in enumerate(names):
            public, private = slot.keys(name)
            if i == 0 and (caps is None or not caps.capped(name)):
                # The parked ACKs ride the first LMOVE: one round trip per job at most (RUN-701),
                # on the slot's own connection (no pool checkout per job).
                count = slot.fetch_count()
                move = ("LMOVE", public, private, "RIGHT", "LEFT")
                parked = slot.take_parked()
                acked = ack_commands(parked)
                marks = slot.batch_mark()
                # With jobs fetched ahead, the list's length after the moves: each job's place
                # counted from the oldest end, which is how its marker names it when it starts
                # (a quick batch names none: the marker says "one of them", slot.QUICK_BATCH).
                quick = slot.quick
                length = [("LLEN", private)] if count > 1 and not quick else []
                try:
                    replies = send_on(slot.connection(), [*acked, *marks, *(move,) * count, *length],
                                      raise_errors=False)
                except Exception:
                    slot.put_back(parked)
                    slot.mark_unknown()
                    raise
                after = _length_after(replies.pop()) if length else None
                acks = replies[:len(acked)]
                if any(isinstance(reply, redis_lib.ResponseError) for reply in acks):
                    slot.put_back(parked)
                    slot.mark_unknown()
                    raise next(reply for reply in acks if isinstance(reply, redis_lib.ResponseError))
                if any(isinstance(reply, redis_lib.ResponseError) for reply in replies[len(acked):-count]):
                    slot.mark_unknown()  # refused (Redis full): the next fetch says it again
                # The ACKs went through (an LREM is accepted even when Redis is full): only a
                # move can have been refused, and the ACKs must not be sent twice.
                refused = next((r for r in replies[-count:] if isinstance(r, redis_lib.ResponseError)), None)
                if refused is not None:
                    moved = [r for r in replies[-count:] if r is not None and not isinstance(r, Exception)]
                    if moved:
                        # None started: each says where it sits when it does.
                        held = [ReliableUnit(name, public, private, job, slot) for job in moved]
                        if not quick:
                            for position, unit in enumerate(held):
                                unit.mark = tail_mark(_oldest_place(after, len(held)) + position, name)
                        slot.ahead.extend(held)
                    raise refused
                units = [ReliableUnit(name, public, private, job, slot) for job in replies[-count:] if job is not None]
                slot.fetched(count, len(units))
                if units:
                    if len(units) > 1:
                        # Each pushed onto the head of the list, behind the ones fetched before:
                        # counted from the oldest end, a job's place stays put when the jobs
                        # fetched after it are handed back (fair.py) while it runs.
                        if not quick:
                            oldest = _oldest_place(after, len(units))
                            for position, unit in enumerate(units[1:], 1):
                                unit.mark = tail_mark(oldest + position, name)
                        slot.started = time.monotonic()
                        slot.ahead.extend(units[1:])
                        self._fair.holding()
                    return units[0]
                continue
            # The rest of the queues in one round trip, in order (PRO-122).
            rest = names[i:]
            if caps is not None and caps.any(rest):
                unit = self._fetch_capped(slot, rest, first=i == 0)
                if unit is not None:
                    return unit
                break
            pairs = [key for other in rest for key in slot.keys(other)]
            hit = FETCH_FIRST(get_redis(config=self.config), keys=pairs)
            if hit:
                name = rest[int(hit[0]) - 1]
                public, private = slot.keys(name)
                return ReliableUnit(name, public, private, hit[1], slot)
            break
        # Nothing queued: this thread is about to wait. Its connection goes back to the
        # pool, so idle threads do not each hold one (the heartbeat closes what the pool
        # holds unused); its next walk checks one out again.
        slot.release_connection()
        if self._done.is_set():
            return None
        if self._watches(names):
            return self._wait_watched(slot)
        if len(names) == 1 and (caps is None or not caps.capped(names[0])):
            # One queue: block on the queue itself, so any push (a Ruby client's too) is
            # moved into the private list the moment it lands. One thread at a time.
            if not self._one_blocker.try_block():
                self._one_blocker.wait(self.poll_interval * QUIET_POLLS)
                return None
            return self._block_on(slot, names[0])
        blocking = get_redis("fetch", block_seconds=self.poll_interval, config=self.config)
        # Several queues and no push watch (refused by Redis, or switched off): no blocking move takes from more than one list, so wait on the queues'
        # wake-up lists, which pushes through the Writer feed in the same round trip while
        # such a fetcher says it waits (wake_demand.py), and walk again once woken. Pushes that send no wake-up (Ruby clients, the reaper)
        # are found by the next walk, one poll interval later at most.
        self._wait_for_wakeup(blocking, names)
        return None

    def _capped(self, names: list[str]) -> bool:
        """True when a queue of ``names`` has a limit (never without ``QUEUE_LIMITS``)."""
        return self._caps is not None and self._caps.any(names)

    def _fetch_capped(self, slot: FetchSlot, names: list[str], first: bool) -> ReliableUnit | None:
        """One job from the first of ``names`` that has one and, if capped, a free slot,
        which the same script takes (issue 47 item 4): a full queue's jobs are never
        moved, so none is fetched and put back. One job of a capped queue, never more: a
        job held ahead would hold a slot without running; an uncapped queue's jobs are
        fetched ahead as the walk's first move fetches them. ``first``: nothing was sent
        yet in this walk, so the parked ACKs and the slot's mark ride this round trip."""
        caps = self._caps
        assert caps is not None
        pairs = [slot.keys(name) for name in names]
        # Fetching ahead from an uncapped queue as the first move of a walk does (the script
        # moves one job only from a capped queue).
        count = slot.fetch_count() if first else 1
        command = caps.fetch_command(pairs, names, arm=False, most=count)
        parked = slot.take_parked() if first else []
        acked = ack_commands(parked)
        # Every job of a walk through capped queues is named as it starts (below), so its
        # fetch says "the oldest is running", never the quick batch's "one of these".
        slot.quick = False
        marks = slot.batch_mark() if first else []
        try:
            replies = send_on(slot.connection(), [*acked, *marks, command], raise_errors=False)
        except Exception:
            slot.put_back(parked)
            slot.mark_unknown()
            raise
        refused = next((r for r in replies[:len(acked)] if isinstance(r, redis_lib.ResponseError)), None)
        if refused is not None:
            slot.put_back(parked)
            slot.mark_unknown()
            raise refused
        reply = replies[-1]
        if isinstance(reply, redis_lib.exceptions.NoScriptError):
            # Redis lost its scripts (a restart, SCRIPT FLUSH): the script did not run; once more, with its text.
            try:
                reply = send_on(slot.connection(), [("EVAL", queue_caps.FETCH.source, *command[2:])],
                                raise_errors=False)[0]
            except Exception:
                slot.mark_unknown()
                raise
        if isinstance(reply, Exception):
            slot.mark_unknown()
            raise reply
        index = int(reply[0])
        if not index:
            if first:
                slot.fetched(count, 0)
            return None
        name = names[index - 1]
        public, private = pairs[index - 1]
        if caps.capped(name):
            if first:
                slot.fetched(1, 1)
            unit = ReliableUnit(name, public, private, reply[3], slot)
            unit.cap = private
            return unit
        units = [ReliableUnit(name, public, private, job, slot) for job in reply[3:]]
        if first:
            slot.fetched(count, len(units))
        if len(units) > 1:
            # As the first move of a walk places them (see there).
            oldest = _oldest_place(_length_after(reply[2]), len(units))
            for position, unit in enumerate(units[1:], 1):
                unit.mark = tail_mark(oldest + position, name)
            slot.started = time.monotonic()
            slot.ahead.extend(units[1:])
            self._fair.holding()
        return units[0]

    def _watches(self, names: list[str]) -> bool:
        """True when an idle thread waits on the push watch for ``names`` (several queues,
        or one in a fetcher of one thread), rather than blocking or polling."""
        if self._watch is None or not names or (len(names) == 1 and not self._watch_single and not self._capped(names)):
            return False
        return self._watch.usable()

    def _block_on(self, slot: FetchSlot, name: str) -> ReliableUnit | None:
        """Block on queue ``name`` for a poll interval; the caller won ``try_block``."""
        public, private = slot.keys(name)
        job = None
        try:
            if self._done.is_set():
                return None  # stopping: the stop's unblock may have looked already
            blocking = get_redis("fetch", block_seconds=self.poll_interval, config=self.config)
            job = blocking.blmove(public, private, self.poll_interval, "RIGHT", "LEFT")
        finally:
            self._one_blocker.unblock(job is not None)
        if job is None:
            return None
        return ReliableUnit(name, public, private, job, slot)

    def _wait_watched(self, slot: FetchSlot) -> ReliableUnit | None:
        """Fetch and arm the push watch in one step, then wait for Redis to say a queue was
        written (by any client), and again, until a job is fetched. None when the wait
        ends otherwise (stop, the subscription lost, an error): the caller walks as usual."""
        watch = self._watch
        quiet = self.poll_interval * QUIET_POLLS
        deadline = time.monotonic() + quiet
        armed = False
        noticed = False  # this walk follows a notice (not the first one of the wait)
        while True:
            names = self._names()
            if not names or self._done.is_set() or (len(names) == 1 and not self._watch_single
                                                    and not self._capped(names)):
                return None
            generation = watch.generation
            if not watch.on():
                # Lost, and being set up again: look again after a poll interval, or as
                # soon as it is back (a job pushed meanwhile is found by that walk).
                watch.wait(generation, self.poll_interval, self._done)
                return None
            if not armed:
                if noticed:
                    pause = watch.loss_pause()
                    if pause:
                        watch.pause(pause, generation, self._done)
                pairs = [slot.keys(name) for name in names]
                caps = self._caps if self._capped(names) else None
                try:
                    index, queued, job = watch.fetch_and_arm(pairs, caps, names)
                except redis_lib.RedisError:
                    # The watch is lost (it sets itself up again); the script may have moved
                    # a job before its reply was lost. The next walk is an ordinary one.
                    self._stale()
                    return None
                if noticed:
                    watch.walked(bool(index))
                if index:
                    if queued:
                        watch.pass_on()  # more to do: the next waiter fetches and arms again
                    name = names[index - 1]
                    public, private = pairs[index - 1]
                    unit = ReliableUnit(name, public, private, job, slot)
                    if caps is not None and caps.capped(name):
                        unit.cap = private
                    return unit
                armed = True
            if watch.wait(generation, deadline - time.monotonic(), self._done):
                armed = False  # a watched key was written: fetch (and arm) again
                noticed = True
                continue
            if self._done.is_set():
                return None
            if watch.generation != generation:
                # Set up anew, or an armed connection was lost: fetch and arm again here
                # (the script looks at every queue, so a job pushed meanwhile is found).
                # A walk would take the fetch slot's connection and keep it open a minute.
                armed = noticed = False
                continue
            # Timed out. The safety look is one thread's per process and interval, not each
            # idle thread's: ten threads walking ten queues every 30 s cost Redis more than
            # all of Sidekiq's idle polling. The others wait on, still armed. The look is
            # the script again, here (it fetches from every queue and arms anew), not a
            # walk: a walk takes the fetch slot's connection, which then never sits unused
            # long enough for the heartbeat to close it, a third connection at -c 1.
            if watch.claim_look(quiet):
                armed = noticed = False
            deadline = time.monotonic() + quiet

    def _wait_for_wakeup(self, blocking: redis_lib.Redis, names: list[str]) -> bool:
        """Block up to the poll interval on the wake-up lists of ``names``; True if woken."""
        cache = self._wake_keys
        wakes = [cache.get(name) or cache.setdefault(name, wake_key(name)) for name in names]
        if self._done.is_set():
            return False  # stopping: say nothing more (the marker simply expires)
        # Pushes write tokens only while some fetcher says it waits on them (wake_demand.py):
        # saying so, and, while pushers may not know yet, waiting in short steps.
        timeout = self._wake_demand.wait_for(self.poll_interval)
        return blocking.blpop(wakes, timeout=timeout) is not None

    # -- reconcile ----------------------------------------------------------

    def _stale(self) -> None:
        """A job may now sit in a private list with no slot holding it: every slot handed
        out checks its lists once (a held one at its holder's next fetch, a free one at
        the first such check)."""
        with self._lock:
            self._generation += 1

    def _reconcile(self, slot: FetchSlot) -> None:
        """Give back the jobs no slot holds, in the calling thread's slot and the free ones.

        Each slot checks its own lists, on its holder's thread, between two jobs: only
        the slot's own commands move jobs into them, so its jobs fetched ahead and its
        parked ACKs are all it can hold there, and no other thread's fetch has to stop
        meanwhile. Raises RedisError (the generation stays unchecked, to try again).
        """
        generation = self._generation
        names = self.order.names
        # A job of a capped queue given back here was moved with a slot by a fetch whose
        # reply was lost, so nobody runs it: its slot goes back with it.
        given: dict[tuple[str, str], int] | None = {} if self._caps is not None else None
        given_back = slot.reconcile(names, given)
        slot.reconciled = generation
        with self._free_slots(lambda free: free.reconciled != generation) as free:
            for other in free:
                given_back += other.reconcile(names, given)
                other.reconciled = generation
        if given:
            self._release_given(given)
        if given_back:
            logger.warning("gave back %d job(s) fetched by commands whose replies were lost", given_back)

    def _release_given(self, given: dict[str, int]) -> None:
        """Free the slots of the jobs given back from capped queues' private lists
        (``given``: (queue, private list) -> jobs)."""
        caps = self._caps
        releases = [(name, private, count) for (name, private), count in given.items()
                    if caps is not None and caps.capped(name)]
        if releases:
            queue_caps.send(self.config, releases)

    # -- stopping ---------------------------------------------------------

    def _give_back_ahead(self, slots: list[FetchSlot]) -> int:
        """Requeue, unrun, the jobs ``slots`` fetched ahead."""
        taken = [unit for slot in slots for unit in slot.take_ahead()]
        if not taken:
            return 0
        try:
            return sum(int(r or 0) for r in Writer(self.config).send(
                [requeue_command(u.private, u.queue_key, u.job) for u in taken]))
        except redis_lib.RedisError as exc:
            logger.warning("could not hand back %d job(s) fetched ahead (%s); a reconcile or the reaper will",
                           len(taken), exc)
            self._stale()
            return 0

    def hand_back(self, slot: FetchSlot) -> int:
        """Give the jobs ``slot`` fetched ahead back to the fetch end of their queues,
        unrun and in their order, while its thread runs another (issue 42): one script
        per private list, so each job is in that list or in its queue at every moment.
        A job its thread takes meanwhile stays with it. Called from the fair watcher."""
        if self._limit.full():
            # Redis refuses writes (its memory limit): the script would be refused and the jobs
            # held by no one until Redis has room. They stay with their thread meanwhile.
            return 0
        with slot.handing:  # until the script has run: the thread's next fetch waits for it
            return self._hand_back(slot)

    def _hand_back(self, slot: FetchSlot) -> int:
        taken = slot.take_ahead()
        if not taken:
            return 0
        groups: dict[str, list[ReliableUnit]] = {}
        for unit in taken:
            groups.setdefault(unit.private, []).append(unit)
        # The running job's marker is left alone: it counts the job's place from the
        # oldest end of the list, and the jobs handed back all sit on the newest side of
        # it. (It used to count from the newest end and this script rewrote it; a job its
        # thread started meanwhile then kept a place past the list's end, and its crash
        # went uncounted.)
        commands = [HAND_BACK.command(keys=[units[0].private, units[0].queue_key], args=[unit.job for unit in units])
                    for units in groups.values()]
        try:
            return sum(int(r or 0) for r in Writer(self.config).send(commands))
        except redis_lib.RedisError as exc:
            # Still in the private list, held by no one: the slot's next reconcile gives them back.
            logger.warning("could not hand back %d job(s) fetched ahead (%s); a reconcile will", len(taken), exc)
            self._stale()
            return 0

    def abandon(self, unit: ReliableUnit) -> None:
        """The thread that runs ``unit`` was abandoned (a hard stop): take its slot back now,
        for the thread that may never come back to free it. The jobs the slot fetched ahead
        go back to their queues, its connection to the pool, and the slot to the free ones,
        where the replacement thread takes it. ``unit`` stays in the slot's private list
        until its settlement acknowledges it (the ACK is parked in the slot and rides its
        next holder's fetch), so a crash meanwhile hands it to the reaper."""
        slot = unit.slot
        with self._lock:
            free, slot.free = slot.free, None
        if free is None or not free.detach():
            return  # freed already (its thread ended)
        self._give_back_ahead([slot])
        slot.clear_mark()
        slot.release_connection()
        slot.forget_pace()
        self._put_free(slot)

    def terminate(self) -> None:
        """No more work; flush parked ACKs (errors reported, not raised) (PRO-134)."""
        self._done.set()
        if self._watch is not None:
            self._watch.stop()
        self._one_blocker.stop()
        self._end_blocks()
        self._flush_quietly()

    def _end_blocks(self) -> None:
        # An idle thread blocked in Redis would hold the stop for up to a poll interval.
        try:
            blocked.unblock_soon(get_redis(config=self.config))
        except Exception as exc:  # a stop goes on whatever Redis says
            logger.debug("could not ask Redis to end the fetch's blocks: %s", exc)

    def bulk_requeue(self, units: list[ReliableUnit]) -> None:
        """Hard shutdown: ACKs first, then each in-flight job back atomically (PRO-135, RUN-203),
        and the jobs fetched ahead (never started)."""
        slots = list(self._slots) if self._pid == os.getpid() else []
        try:
            # Every slot's: a job that finished just now is parked in its own slot, and
            # requeued before its ACK went out it would run again.
            self._flush(slots)
        except redis_lib.RedisError:
            # A finished job would be requeued and re-run; leave everything to the reaper instead.
            logger.exception("could not flush ACKs; in-flight jobs stay in private lists for the reaper")
            return
        self._give_back_ahead(slots)
        if units:
            commands = [requeue_command(unit.private, unit.queue_key, unit.job) for unit in units]
            try:
                moved = sum(int(r or 0) for r in Writer(self.config).send(commands))
                logger.info("pushed %d in-flight job(s) back to their queues", moved)
            except redis_lib.RedisError:
                logger.exception("could not requeue %d in-flight job(s); the reaper will recover them", len(units))
                return  # the markers stay: the reaper judges those lists by them
            for unit in units:
                queue_caps.release(unit)  # back in its queue: its slot is free (the settle finds none)
        # Nothing of this process runs any more: its "running" markers go with it. (A thread
        # that leaves normally deletes its own, FetchSlot.clear_mark.)
        markers = [slot.marker for slot in slots]
        if markers:
            try:
                Writer(self.config).send([("DEL", *markers)])
            except redis_lib.RedisError:
                logger.debug("could not delete the running markers; they lapse on their own")


def _length_after(reply: object) -> int | None:
    """The ``LLEN`` reply of a fetch ahead, None when it is not a length."""
    return reply if isinstance(reply, int) and not isinstance(reply, bool) else None


def _oldest_place(length: int | None, moved: int) -> int:
    """The place, from the oldest end of the private list, of the first of ``moved`` jobs
    one fetch pushed onto its head: 0 when the list held nothing else (the usual case:
    the ACKs before the moves emptied it), or when its length is unknown."""
    return max(length - moved, 0) if length is not None else 0
