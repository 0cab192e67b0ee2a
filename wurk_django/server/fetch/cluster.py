"""Reliable fetch on a Redis Cluster (issue 46 stage 3): the cluster layout's fetcher.

The one-server fetchers take from several queues with one command (``BRPOP`` over
every queue, or a script). On a cluster a command, a ``MULTI`` or a script touches
keys of one hash slot only, and each queue has its own slot (``{q:<name>}``,
:mod:`wurk_django.redis.cluster_layout`), so this fetcher works per queue:

* each processor thread holds a fetch slot (:class:`ClusterSlot`: a number, the jobs
  it fetched ahead, the ACKs it parked), and a private list per queue,
  ``{q:<name>}:private|<host>|<pid>|<nonce>|<slot>``, in that queue's slot;
* a fetch takes from the queues in their order (strict, or the weighted shuffle
  of :class:`~.queues.QueueOrder`), one script per queue (``lua/cluster_fetch.lua``,
  its two keys in ``KEYS``), which acknowledges the thread's finished jobs of that
  queue and moves up to *n* jobs from ``{q:<name>}:queue`` into the thread's private
  list: one step on the queue's primary, so a kill -9 leaves every job fetched in the
  private list, where the reaper finds it (:mod:`wurk_django.server.cluster_reaper`);
* **fetching ahead**, as on one server (:mod:`.slot`, same constants): a thread whose
  last fetches all brought what they asked for, of jobs shorter than
  ``PREFETCH_MAX_GAP``, asks for about ``PREFETCH_AHEAD`` seconds of its recent jobs
  (at least 2, at most ``FETCH_SIZE``, 16 by default), else for one. The first job runs
  now; the others wait in the slot and run next on the same thread without a round
  trip. A thread whose current job outlives ``fair.BOUND``, or whose jobs' queue is
  paused meanwhile, hands them back unrun (the one-server watcher, :mod:`.fair`, and
  ``lua/hand_back_ahead.lua``, one script per private list);
* **batched ACKs**: a finished job's ACK is parked in the slot of the thread that
  ran it and rides that thread's next fetch from the job's queue, inside the same
  script (``LREM`` of the exact bytes, several in one round trip). ACKs parked for the
  other queues' lists go out, one script per list, once ``FETCH_SIZE`` of them are
  parked, before the thread blocks, when it stops and at a hard shutdown. An ACK
  sent from another thread than the one that fetched the job (a job whose thread was
  abandoned) goes out at once, alone. On a busy queue of short jobs a job then costs
  its primary 1/n of a round trip;
* when every queue is empty the thread blocks on *one* queue, ``BLMOVE`` into its
  private list with a :data:`BLOCK_SECONDS` timeout; the next idle fetch (of any
  thread) blocks on the next queue, so idle threads spread over the queues and none
  spins. With at least as many threads as queues every queue has a thread waiting;
  with fewer, a job on a queue nobody waits on waits at most one block timeout;
* giving a job back is ``lua/cluster_requeue.lua`` (private list -> queue, one slot).

Which job was running when a process died: the cluster reaper counts no crash (the
poison-pill accounting is not converted to the cluster), so every job of a dead
process's private lists goes back onto its queue uncounted, and writes no "running"
marker. As on one server, the jobs fetched ahead and not started go back and run once;
the job running at the death runs again; and the jobs that finished with their ACK
still parked (fewer than ``FETCH_SIZE`` a thread, the batch of short jobs it ran last)
run again too.

A paused queue (``{q:<name>}:paused``, :mod:`wurk_django.pause`) is skipped: the flags
of this fetcher's queues are read through a :class:`~wurk_django.pause.PausedCache`
(at most 2 s old, as on one server), one pipeline per read (issue 46 item 3).

Faults a cluster has (issue 46 item 4: a failover, a primary killed, a slot moved, a
node restarted) touch the queues of one primary, or of one slot, for a few seconds:

* a queue whose command failed rests for :data:`ERROR_BACKOFF` (every thread skips it)
  while the threads go on with the other queues, so a primary being failed over stalls
  only its own queues, not the whole worker; the ACKs that rode the failed fetch stay
  parked, and ride the next one (an ``LREM`` of exact bytes is safe to repeat);
* a command that failed without a reply (a connection lost, a timeout) may have run:
  a fetch that moved jobs whose reply never came (or that redis-py's cluster client
  sent again after a connection error, see ``cluster_client``) leaves jobs in this
  thread's private list that no thread runs, and no reaper takes back while this
  process lives. So such a private list is marked, and the thread's next fetch from
  that queue first moves whatever it holds back onto the queue (the fetch script's
  sweep): the thread holds no job of that queue when it fetches;
* jobs fetched ahead from a queue on which any thread's command failed since the fetch
  are handed back before one of them starts: a primary killed may have lost the
  fetch's write (replication is asynchronous), and then the same jobs are queued again
  on its replica. The hand-back moves only what is still in the private list, so a job
  whose fetch was lost is dropped here and run from its queue, once;
* an ACK sent alone waits out a failover (:data:`ACK_PATIENCE`) instead of failing at
  once: a failed ACK gives the job back to its queue, and it would run a second time.
  So does the last flush of a thread's parked ACKs when it stops.

Queue caps are a subclass's (:mod:`wurk_django.queue_limits.cluster`: one job per
fetch of a capped queue, never a blocking move there). Not here yet: the push watch
(idle threads block on one queue at a time instead). Outside a cluster this module is
never imported: the one-server fetchers are unchanged.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
from collections import deque
from typing import Any

import redis as redis_lib
from redis.backoff import NoBackoff
from redis.exceptions import AskError, ClusterDownError, RedisClusterException, TryAgainError
from redis.retry import Retry

from ...conf import Config
from ...pause import PausedCache, paused_among
from ...redis.cluster_layout import CLUSTER
from ...redis.errors import is_failover
from ...redis.scripts import lua
from ..outage import OutageLog
from ..state import NONCE, hostname
from .fair import AheadWatch
from .queues import QueueOrder
from .slot import PREFETCH, PREFETCH_AFTER, PREFETCH_AHEAD, PREFETCH_MAX_GAP

logger = logging.getLogger("wurk_django.worker")

#: Seconds an idle thread blocks on one queue before it looks at all of them again.
BLOCK_SECONDS = 1
ERROR_BACKOFF = 1.0
FETCH = lua("cluster_fetch")
REQUEUE = lua("cluster_requeue")
HAND_BACK = lua("hand_back_ahead")

#: What a cluster's passing faults raise. redis-py's ``SlotNotCoveredError`` (no node for a
#: slot in its map, mid-failover) is not a ``RedisError``.
FAULTS = (redis_lib.RedisError, RedisClusterException)

#: Seconds an ACK keeps trying through a fault before it gives up (the job then goes back
#: to its queue, and runs again): longer than a killed primary's failover with the
#: default ``cluster-node-timeout`` of 15 s takes is not worth holding a thread for; a
#: failover at the tests' 1 s node timeout takes about 2 s.
ACK_PATIENCE = 15.0


def passing(exc: BaseException) -> bool:
    """Whether ``exc`` is a cluster's passing fault, worth trying again in a moment: a
    connection lost or a timeout, a slot without a node, ``CLUSTERDOWN``, ``TRYAGAIN`` (a
    slot moving), redirections given up, a failover's refusals."""
    return (not isinstance(exc, redis_lib.ResponseError)
            or isinstance(exc, (ClusterDownError, TryAgainError, AskError)) or is_failover(exc))


def uncertain(exc: BaseException) -> bool:
    """Whether a command that raised ``exc`` may have run all the same: an error reply
    (``ResponseError``: ``TRYAGAIN``, ``CLUSTERDOWN``, ``MOVED`` given up...) says it did
    not; a connection lost or a timeout cannot say."""
    return not isinstance(exc, redis_lib.ResponseError)


class ClusterUnit:
    """A job fetched on a cluster: in ``private`` (its thread's list in the queue's slot)
    until :meth:`acknowledge` or :meth:`requeue`. ``slot`` is the fetch slot of the thread
    that fetched it; ``faults`` the count of faults its queue had seen at the fetch."""

    __slots__ = ("queue", "job", "fetcher", "jid", "private", "slot", "faults")

    def __init__(self, queue: str, job: bytes, fetcher: ClusterFetch, private: str,
                 slot: ClusterSlot | None = None, faults: int = 0) -> None:
        self.queue = queue
        self.job = job
        self.fetcher = fetcher
        self.jid: str | None = None
        self.private = private
        self.slot = slot
        self.faults = faults

    @property
    def queue_key(self) -> str:
        return CLUSTER.queue(self.queue)

    def acknowledge(self) -> None:
        """The job is done, or its outcome is booked. On the thread that fetched it, the
        ACK is parked in its slot and rides that thread's next fetch (this module's
        docstring); from any other thread it is sent now (:meth:`send_ack`)."""
        slot = self.slot
        if slot is not None and slot.owner == threading.get_ident():
            slot.park(self)
            return
        self.send_ack()

    def send_ack(self) -> None:
        """Out of the private list now. Through a fault (its primary failed over, its slot
        moving) it tries again for up to :data:`ACK_PATIENCE` seconds: the ``LREM`` of these
        exact bytes is safe to repeat, and an ACK that gives up gives the job back to run again."""
        self.fetcher.send_acks(self.private, [self], raise_as_connection_error=True)

    def requeue(self) -> None:
        """Back onto the fetch end of its queue, unrun (private list -> queue, one step)."""
        try:
            REQUEUE(self.fetcher.redis(), keys=[self.private, self.queue_key], args=[self.job])
        except Exception:
            self.fetcher.unsure(self.private)  # the next fetch from this queue sweeps it
            raise


class ClusterSlot:
    """One processor thread's share of the fetch: its number (which names its private
    lists), the jobs it fetched ahead (in run order) and the ACKs it parked (by private
    list), and its prefetch streak. Only the holding thread fetches into its lists; a hard
    shutdown or an abandonment may take what it holds from another thread, under ``lock``."""

    __slots__ = ("number", "owner", "ahead", "parked", "started", "most", "lock",
                 "_streak", "_last", "_brought", "_handed_back")

    def __init__(self, number: int, most: int) -> None:
        self.number = number
        self.owner: int | None = threading.get_ident()
        self.ahead: deque[ClusterUnit] = deque()
        self.parked: dict[str, list[ClusterUnit]] = {}
        # When the thread's current job started (monotonic), read by the fair watcher.
        self.started = 0.0
        self.most = most
        self.lock = threading.Lock()
        self._streak = 0
        self._last = 0.0
        self._brought = 1
        self._handed_back = False

    # -- parked ACKs --------------------------------------------------------

    def park(self, unit: ClusterUnit) -> None:
        with self.lock:
            self.parked.setdefault(unit.private, []).append(unit)

    def parked_count(self) -> int:
        return sum(len(units) for units in self.parked.values())

    def take_parked(self, private: str | None = None) -> dict[str, list[ClusterUnit]]:
        """The parked ACKs of ``private`` (every list's when ``None``), taken out."""
        with self.lock:
            if private is None:
                taken, self.parked = self.parked, {}
                return taken
            units = self.parked.pop(private, None)
            return {private: units} if units else {}

    def put_back(self, private: str, units: list[ClusterUnit]) -> None:
        """ACKs that could not be sent: parked again, before any parked since."""
        if units:
            with self.lock:
                self.parked[private] = units + self.parked.get(private, [])

    # -- jobs fetched ahead -------------------------------------------------

    def next_ahead(self) -> ClusterUnit | None:
        try:
            return self.ahead.popleft()
        except IndexError:  # handed back meanwhile (the fair watcher, a hard shutdown)
            return None

    def take_ahead(self) -> list[ClusterUnit]:
        """Every job fetched ahead, in run order. One ``popleft`` at a time: another
        thread taking meanwhile gets the rest, and no job goes to both."""
        taken: list[ClusterUnit] = []
        try:
            while self.ahead:
                taken.append(self.ahead.popleft())
        except IndexError:
            pass
        if taken:
            self._handed_back = True
        return taken

    # -- how many to fetch (the one-server rule, fetch/slot.py) ------------

    def fetch_count(self) -> int:
        """One, or once the last ``PREFETCH_AFTER`` fetches all hit with short jobs in
        between, about ``PREFETCH_AHEAD`` seconds of them (at least 2, at most ``most``)."""
        if self._streak < PREFETCH_AFTER or self.most == 1:
            return 1
        per_job = (time.monotonic() - self._last) / self._brought
        if per_job >= PREFETCH_MAX_GAP:
            return 1
        return min(self.most, max(2, round(PREFETCH_AHEAD / max(per_job, 1e-6))))

    def fetched(self, wanted: int, got: int) -> None:
        now = time.monotonic()
        # Not after a hand-back: the jobs handed back never ran here, so their time reads short.
        full = got == wanted and not self._handed_back and (now - self._last) / self._brought < PREFETCH_MAX_GAP
        self._streak = self._streak + 1 if full else 0
        self._last = now
        self._brought = max(got, 1)
        self._handed_back = False

    def missed(self) -> None:
        """A walk found every queue empty: the streak starts again."""
        self._streak = 0


class ClusterFetch:
    """The fetcher of a worker on a Redis Cluster (this module's docstring says how).

    ``client`` is a redis-py ``RedisCluster`` whose read timeout exceeds
    :data:`BLOCK_SECONDS`; by default built from ``config``."""

    def __init__(self, config: Config, client: Any = None) -> None:
        self.config = config
        self.order = QueueOrder(config.queues)
        self._client = client
        self._client_lock = threading.Lock()
        self._done = threading.Event()
        self._local = threading.local()
        self._free: list[int] = []
        self._next_slot = itertools.count()
        self._slot_lock = threading.Lock()
        # Every slot a thread holds, for the hard shutdown, the fair watcher and in_hand().
        self._slots: list[ClusterSlot] = []
        #: The most jobs one fetch moves (``FETCH_SIZE``; 0 and 1 both mean one at a time).
        self.most = max(1, int(getattr(config, "fetch_size", PREFETCH) or 1))
        # Which queue the next idle fetch blocks on: shared, so idle threads spread.
        self._turn = itertools.count()
        # Queue name -> monotonic() until which no thread fetches from it (its command failed).
        self._resting: dict[str, float] = {}
        # Queue name -> how many of its commands failed so far (a unit fetched before the
        # last one is handed back rather than run: this module's docstring).
        self._faults: dict[str, int] = {}
        # Private lists that may hold a job no thread runs (a command on them failed
        # without a reply): swept back onto their queue before the next fetch into them.
        self._unsure: set[str] = set()
        self._outage = OutageLog("fetch", f", retrying every {ERROR_BACKOFF:g}s (parked ACKs are kept)")
        self.pid = os.getpid()
        self.paused = PausedCache(config, read=lambda: paused_among(self.redis(), self.order.names))
        # Hands back the jobs a slot holds behind a long job, or of a paused queue (fair.py).
        self._fair = AheadWatch(lambda: list(self._slots), self.hand_back, self._paused_now, self._done, config)

    def redis(self) -> Any:
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    from ...redis.cluster import cluster_client
                    from ...redis.connection import READ_TIMEOUT

                    # No replay by redis-py: its cluster client sends a command again after a
                    # connection error or a timeout (3 times by default), and a fetch that ran
                    # without its reply reaching us, then sent again, moves more jobs and
                    # strands the first in this thread's private list (issue 46 item 4). Every
                    # failure reaches the fetch instead, which marks that list for a sweep. A
                    # failed command still makes redis-py refresh its slot map, and MOVED/ASK
                    # are still followed.
                    client = cluster_client(self.config, socket_timeout=READ_TIMEOUT + BLOCK_SECONDS)
                    # redis-py 6 and later count the tries by ``retry``, 5.x by
                    # ``cluster_error_retry_attempts``: set after construction, as either
                    # keyword is refused or deprecated by one of them.
                    client.retry = Retry(NoBackoff(), 0)
                    client.cluster_error_retry_attempts = 0
                    self._client = client
        return self._client

    def _paused_now(self) -> frozenset[str]:
        try:
            return self.paused.get()
        except FAULTS:
            return self.paused.last()

    # -- slots --------------------------------------------------------------

    def _slot(self) -> ClusterSlot:
        slot = getattr(self._local, "slot", None)
        if slot is None:
            with self._slot_lock:
                number = self._free.pop() if self._free else next(self._next_slot)
                slot = ClusterSlot(number, self.most)
                self._slots.append(slot)
            self._local.slot = slot
        return slot

    def private_list(self, queue: str, slot: int) -> str:
        return CLUSTER.private_queue(queue, hostname(), self.pid, NONCE, slot)

    def release_thread_connection(self) -> None:
        """A processor thread exits: the jobs it fetched ahead go back to their queues, its
        parked ACKs out (flush_acks ran just before), and its slot number is free for the
        next thread."""
        slot = getattr(self._local, "slot", None)
        if slot is None:
            return
        del self._local.slot
        self._close(slot)

    def _close(self, slot: ClusterSlot) -> None:
        slot.owner = None  # an ACK of one of its jobs from now on goes out at once
        self._give_back(slot.take_ahead())
        try:
            self._flush(slot, patience=ACK_PATIENCE)
        except Exception as exc:
            # Those jobs stay in the private lists: run again once the reaper takes them back
            # after this process ends (as a failed ACK gives a job back).
            logger.warning("could not send %d parked ACK(s) of an exiting thread: %s", slot.parked_count(), exc)
        with self._slot_lock:
            if slot in self._slots:
                self._slots.remove(slot)
                self._free.append(slot.number)

    def abandon(self, unit: ClusterUnit) -> None:
        """The thread running ``unit`` was abandoned (a hard stop): what its slot holds
        comes back now, for a thread that may never fetch again. Its jobs fetched ahead go
        back to their queues and its parked ACKs out; ``unit`` stays in its private list
        until its settlement acknowledges it (sent at once: the slot has no owner now).
        The slot's number stays taken: the abandoned thread may still hold its lists."""
        slot = unit.slot
        if slot is None or slot.owner is None:
            return
        slot.owner = None
        self._give_back(slot.take_ahead())
        try:
            self._flush(slot, patience=0.0)
        except Exception as exc:
            logger.warning("could not send the ACKs parked by an abandoned thread (%s); its jobs stay in its "
                           "private lists until this process ends", exc)
        with self._slot_lock:
            if slot in self._slots:
                self._slots.remove(slot)

    # -- faults ---------------------------------------------------------------

    def unsure(self, private: str) -> None:
        """``private`` may hold a job no thread runs: the next fetch into it sweeps it first."""
        self._unsure.add(private)

    def _failed(self, name: str, private: str, exc: BaseException, *, script: bool = False) -> None:
        """A command on queue ``name`` failed: the queue rests, and ``private`` is swept by the
        next fetch into it when the command may have run. A script may have: an error reply
        raised part way (a key found not local while its slot moves, with redis-py 5.3) leaves
        what ran before it done, and so may an error of the client itself after sending."""
        if isinstance(exc, Exception) and not isinstance(exc, FAULTS):
            logger.warning("fetch from queue %s failed: %r", name, exc)
        else:
            self._outage.failed(exc)
        self._resting[name] = time.monotonic() + ERROR_BACKOFF
        self._faults[name] = self._faults.get(name, 0) + 1
        if script or uncertain(exc):
            self.unsure(private)

    # -- ACKs -----------------------------------------------------------------

    def send_acks(self, private: str, units: list[ClusterUnit], *, patience: float | None = None,
                  raise_as_connection_error: bool = False) -> None:
        """Acknowledge ``units`` (all of ``private``) in one round trip: the fetch script
        moving nothing. Through a passing fault it tries again for ``patience`` seconds; then
        the list is marked unsure and the error raised (as a ``ConnectionError`` when asked:
        the processor then gives a lone job back to its queue rather than to the dead set)."""
        queue = units[0].queue_key
        patience = ACK_PATIENCE if patience is None else patience
        deadline = time.monotonic() + patience
        pause = 0.1
        while True:
            try:
                FETCH(self.redis(), keys=[private, queue], args=[0, 0, *[unit.job for unit in units]])
                return
            except FAULTS as exc:
                if not passing(exc):
                    raise
                if time.monotonic() + pause > deadline:
                    self.unsure(private)
                    if raise_as_connection_error:
                        jid = units[0].jid if len(units) == 1 else f"{len(units)} jobs"
                        raise redis_lib.ConnectionError(f"could not acknowledge job {jid} through a cluster "
                                                        f"fault for {patience:g}s: {exc}") from exc
                    raise
                logger.debug("ACK of %d job(s) failed (%s); trying again in %.1fs", len(units), exc, pause)
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def _flush(self, slot: ClusterSlot, *, patience: float = 0.0, resting: bool = True) -> None:
        """Send the ACKs parked in ``slot``, one script per private list; those that fail
        are parked again and the first error raised once every list was tried. With
        ``resting=False`` the lists of queues resting after a fault are left parked."""
        now = time.monotonic()
        error: BaseException | None = None
        for private, units in slot.take_parked().items():
            if not resting and self._resting.get(units[0].queue, 0.0) > now:
                slot.put_back(private, units)
                continue
            try:
                self.send_acks(private, units, patience=patience)
            except Exception as exc:
                slot.put_back(private, units)
                if error is None:
                    error = exc
        if error is not None:
            raise error

    def flush_acks(self) -> None:
        """Send the calling thread's parked ACKs now (a processor exits), waiting out a
        fault for up to :data:`ACK_PATIENCE`; on failure they stay parked and it raises."""
        slot = getattr(self._local, "slot", None)
        if slot is not None and slot.parked:
            self._flush(slot, patience=ACK_PATIENCE)

    def _flush_quietly(self, slot: ClusterSlot) -> None:
        try:
            self._flush(slot, resting=False)
        except FAULTS as exc:
            self._outage.failed(exc)
        except Exception as exc:
            logger.warning("sending parked ACKs failed (they stay parked): %r", exc)

    # -- handing back ---------------------------------------------------------

    def _give_back(self, units: list[ClusterUnit]) -> int:
        """Back to the fetch end of their queues, unrun and in their order, only those still
        in their private list (``lua/hand_back_ahead.lua``, one script per list). A list a
        script failed on is marked unsure: the thread's next fetch from it sweeps it."""
        groups: dict[str, list[ClusterUnit]] = {}
        for unit in units:
            groups.setdefault(unit.private, []).append(unit)
        moved = 0
        for private, group in groups.items():
            try:
                moved += int(HAND_BACK(self.redis(), keys=[private, group[0].queue_key],
                                       args=[unit.job for unit in group]) or 0)
            except Exception as exc:
                self.unsure(private)
                logger.warning("could not hand back %d job(s) fetched ahead to queue %s (%s); the thread's next "
                               "fetch from it, or the reaper, will", len(group), group[0].queue, exc)
        return moved

    def hand_back(self, slot: ClusterSlot) -> int:
        """Give the jobs ``slot`` fetched ahead back to their queues while its thread runs
        another (called by the fair watcher)."""
        taken = slot.take_ahead()
        return self._give_back(taken) if taken else 0

    # -- fetching ---------------------------------------------------------------

    def _fetch(self, client: Any, slot: ClusterSlot, name: str, count: int) -> list[ClusterUnit]:
        """One script on queue ``name``'s slot: this slot's parked ACKs of that queue, the
        sweep when its list is unsure, and up to ``count`` jobs moved. Raises what the
        cluster raised, with the ACKs parked again and the queue resting."""
        private = self.private_list(name, slot.number)
        acks = slot.take_parked(private).get(private, [])
        sweep = private in self._unsure
        faults = self._faults.get(name, 0)
        try:
            jobs = FETCH(client, keys=[private, CLUSTER.queue(name)],
                         args=[count, 1 if sweep else 0, *[unit.job for unit in acks]])
        except Exception as exc:
            # Whatever failed (a fault, an error reply part way through the script, the client
            # itself): the ACKs stay parked, and the list is swept by the next fetch into it.
            slot.put_back(private, acks)
            self._failed(name, private, exc, script=True)
            raise
        if sweep:
            self._unsure.discard(private)
            logger.warning("swept %s back onto queue %s: a command on it had failed without a reply", private, name)
        return [ClusterUnit(name, job, self, private, slot, faults) for job in jobs or ()]

    def _block(self, client: Any, slot: ClusterSlot, name: str, block: float) -> ClusterUnit | None:
        private = self.private_list(name, slot.number)
        if private in self._unsure or private in slot.parked:
            # Not seen by the walk this time (it returned before this queue): its ACKs and
            # sweep first, moving nothing.
            self._fetch(client, slot, name, 0)
        faults = self._faults.get(name, 0)
        try:
            raw = client.blmove(CLUSTER.queue(name), private, block, "RIGHT", "LEFT")
        except Exception as exc:
            self._failed(name, private, exc, script=not isinstance(exc, FAULTS))
            raise
        return None if raw is None else ClusterUnit(name, raw, self, private, slot, faults)

    def _next_ahead(self, slot: ClusterSlot) -> ClusterUnit | None:
        """The next job fetched ahead, unless a fault struck its queue since the fetch
        (then what the slot holds goes back: this module's docstring)."""
        slot.started = time.monotonic()  # before the take: the rest wait behind this job now
        unit = slot.next_ahead()
        if unit is None:
            return None
        if self._faults.get(unit.queue, 0) != unit.faults:
            moved = self._give_back([unit, *slot.take_ahead()])
            logger.info("handed back %d job(s) fetched ahead from queue %s: a command on it failed since", moved,
                        unit.queue)
            return None
        return unit

    def retrieve_work(self) -> ClusterUnit | None:
        """The next job, or ``None`` when stopping, idle for one block timeout, or Redis failed."""
        slot = self._slot()
        if self._done.is_set():
            self._give_back(slot.take_ahead())
            self._flush_quietly(slot)
            self._done.wait(0.05)
            return None
        if slot.ahead:
            unit = self._next_ahead(slot)
            if unit is not None:
                return unit
        now = time.monotonic()
        paused = self._paused_now()
        # A paused queue is skipped; a queue whose primary just failed rests a moment and
        # the others go on (module docstring).
        names = [name for name in self.order()
                 if name not in paused and self._resting.get(name, 0.0) <= now]
        if not names:
            # Every queue paused or resting: look again when the first rest ends, or after a
            # block's wait when none rests (paused queues only).
            self._flush_quietly(slot)
            ends = [until for until in self._resting.values() if until > now]
            self._done.wait(max(min(ends) - now, 0.05) if ends else BLOCK_SECONDS)
            return None
        client = self.redis()
        count = slot.fetch_count()
        failed = False
        for name in names:
            try:
                units = self._fetch(client, slot, name, count)
            except Exception:
                failed = True
                continue
            if units:
                if not failed:
                    self._outage.succeeded()
                slot.fetched(count, len(units))
                if len(units) > 1:
                    slot.started = time.monotonic()
                    slot.ahead.extend(units[1:])
                    self._fair.holding()
                if slot.parked_count() >= self.most:
                    # ACKs of other queues' lists, parked while this thread drained one queue:
                    # out now, one script per list, so they never pile up past a batch.
                    self._flush_quietly(slot)
                return units[0]
        slot.missed()
        if failed:
            return None  # some queue failed: look at all of them again rather than block on one
        self._flush_quietly(slot)  # before blocking: nothing stays parked while the thread waits
        # While a queue rests, block no longer than its rest: it is asked again when the rest
        # ends, not a whole block timeout later (a failover's end is noticed sooner).
        ends = [until for until in self._resting.values() if until > now]
        block = BLOCK_SECONDS if not ends else max(0.1, min(float(BLOCK_SECONDS), min(ends) - now))
        name = names[next(self._turn) % len(names)]
        try:
            unit = self._block(client, slot, name, block)
        except Exception:
            return None
        self._outage.succeeded()
        return unit

    def bulk_requeue(self, units: list[ClusterUnit]) -> None:
        """The hard-shutdown path: every slot's parked ACKs first (a job that finished just
        now must not go back and run again), then the jobs fetched ahead and every job in
        flight back onto its queue."""
        slots = list(self._slots)
        for slot in slots:
            try:
                self._flush(slot)
            except Exception:
                logger.exception("could not send parked ACKs; those jobs stay in private lists for the reaper")
        for slot in slots:
            self._give_back(slot.take_ahead())
        put_back = 0
        for unit in units:
            try:
                unit.requeue()
                put_back += 1
            except redis_lib.RedisError:
                logger.exception("could not push job %s back to its queue; the reaper will", unit.jid)
        if put_back:
            logger.info("pushed %d in-flight job(s) back to their queues", put_back)

    def in_hand(self) -> int:
        """Jobs fetched ahead that no thread has started yet."""
        return sum(len(slot.ahead) for slot in list(self._slots))

    def terminate(self) -> None:
        self._done.set()
