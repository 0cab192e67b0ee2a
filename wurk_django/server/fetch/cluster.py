"""Reliable fetch on a Redis Cluster (issue 46 stage 3): the cluster layout's fetcher.

The one-server fetchers take from several queues with one command (``BRPOP`` over
every queue, or a script). On a cluster a command, a ``MULTI`` or a script touches
keys of one hash slot only, and each queue has its own slot (``{q:<name>}``,
:mod:`wurk_django.redis.cluster_layout`), so this fetcher works per queue:

* a fetch takes from the queues in their order (strict, or the weighted shuffle
  of :class:`~.queues.QueueOrder`), one non-blocking ``LMOVE`` per queue, from
  ``{q:<name>}:queue`` into this thread's private list ``{q:<name>}:private|<host>|<pid>|<nonce>|<slot>``:
  both in the queue's slot, so the move is atomic and a kill -9 leaves the job
  in the private list, where the reaper finds it (:mod:`wurk_django.server.cluster_reaper`);
* when every queue is empty the thread blocks on *one* queue, ``BLMOVE`` into its
  private list with a :data:`BLOCK_SECONDS` timeout; the next idle fetch (of any
  thread) blocks on the next queue, so idle threads spread over the queues and none
  spins. With at least as many threads as queues every queue has a thread waiting;
  with fewer, a job on a queue nobody waits on waits at most one block timeout;
* the ACK is ``LREM`` of the exact bytes on the private list (one key); giving a job
  back is ``lua/cluster_requeue.lua`` (private list -> queue, one slot).

A paused queue (``{q:<name>}:paused``, :mod:`wurk_django.pause`) is skipped: the flags
of this fetcher's queues are read through a :class:`~wurk_django.pause.PausedCache`
(at most 2 s old, as on one server), one pipeline per read (issue 46 item 3).

Faults a cluster has (issue 46 item 4: a failover, a primary killed, a slot moved, a
node restarted) touch the queues of one primary, or of one slot, for a few seconds:

* a queue whose command failed rests for :data:`ERROR_BACKOFF` (every thread skips it)
  while the threads go on with the other queues, so a primary being failed over stalls
  only its own queues, not the whole worker;
* a command that failed without a reply (a connection lost, a timeout) may have run:
  a ``LMOVE`` that moved a job whose reply never came (or that redis-py's cluster client
  sent again after a connection error, see ``cluster_client``) leaves a job in this
  thread's private list that no thread runs, and no reaper takes back while this
  process lives. So such a private list is marked, and the thread's next fetch from
  that queue first moves whatever it holds back onto the queue
  (``lua/cluster_reclaim.lua``): the thread holds no job of that queue when it fetches;
* an ACK waits out a failover (:data:`ACK_PATIENCE`) instead of failing at once: a
  failed ACK gives the job back to its queue, and it would run a second time.

Not here yet (refused at boot on a cluster, see ``wurk_django.server.cluster_boot``):
fetching ahead, queue caps, the push watch. Outside a cluster this
module is never imported: the one-server fetchers are unchanged.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
import time
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
from .queues import QueueOrder

logger = logging.getLogger("wurk_django.worker")

#: Seconds an idle thread blocks on one queue before it looks at all of them again.
BLOCK_SECONDS = 1
ERROR_BACKOFF = 1.0
REQUEUE = lua("cluster_requeue")
RECLAIM = lua("cluster_reclaim")

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
    """A job fetched on a cluster: in ``private`` (this thread's list in the queue's slot)
    until :meth:`acknowledge` or :meth:`requeue`."""

    __slots__ = ("queue", "job", "fetcher", "jid", "private")

    def __init__(self, queue: str, job: bytes, fetcher: ClusterFetch, private: str) -> None:
        self.queue = queue
        self.job = job
        self.fetcher = fetcher
        self.jid: str | None = None
        self.private = private

    @property
    def queue_key(self) -> str:
        return CLUSTER.queue(self.queue)

    def acknowledge(self) -> None:
        """The job is done, or its outcome is booked: out of the private list. Through a
        fault (its primary failed over, its slot moving) it tries again for up to
        :data:`ACK_PATIENCE` seconds: the ``LREM`` of these exact bytes is safe to repeat,
        and an ACK that gives up gives the job back to run again."""
        deadline = time.monotonic() + ACK_PATIENCE
        pause = 0.1
        while True:
            try:
                self.fetcher.redis().lrem(self.private, 1, self.job)
                return
            except FAULTS as exc:
                if not passing(exc):
                    raise
                if time.monotonic() + pause > deadline:
                    self.fetcher.unsure(self.private)
                    # As a connection error: the processor then gives the job back to its
                    # queue (a TRYAGAIN or CLUSTERDOWN reply would send it to the dead set).
                    raise redis_lib.ConnectionError(f"could not acknowledge job {self.jid} through a "
                                                    f"cluster fault for {ACK_PATIENCE:g}s: {exc}") from exc
                logger.debug("ACK of job %s failed (%s); trying again in %.1fs", self.jid, exc, pause)
            time.sleep(pause)
            pause = min(pause * 2, 1.0)

    def requeue(self) -> None:
        """Back onto the fetch end of its queue, unrun (private list -> queue, one step)."""
        try:
            REQUEUE(self.fetcher.redis(), keys=[self.private, self.queue_key], args=[self.job])
        except FAULTS:
            self.fetcher.unsure(self.private)  # the next fetch from this queue sweeps it
            raise


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
        self._slots = threading.local()
        self._free: list[int] = []
        self._next_slot = itertools.count()
        self._slot_lock = threading.Lock()
        # Which queue the next idle fetch blocks on: shared, so idle threads spread.
        self._turn = itertools.count()
        # Queue name -> monotonic() until which no thread fetches from it (its command failed).
        self._resting: dict[str, float] = {}
        # Private lists that may hold a job no thread runs (a command on them failed
        # without a reply): swept back onto their queue before the next fetch into them.
        self._unsure: set[str] = set()
        self._outage = OutageLog("fetch", f", retrying every {ERROR_BACKOFF:g}s")
        self.pid = os.getpid()
        self.paused = PausedCache(config, read=lambda: paused_among(self.redis(), self.order.names))

    def redis(self) -> Any:
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    from ...redis.cluster import cluster_client
                    from ...redis.connection import READ_TIMEOUT

                    # No replay by redis-py: its cluster client sends a command again after a
                    # connection error or a timeout (3 times by default), and a LMOVE that ran
                    # without its reply reaching us, then sent again, moves a second job and
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

    def _slot(self) -> int:
        slot = getattr(self._slots, "index", None)
        if slot is None:
            with self._slot_lock:
                slot = self._free.pop() if self._free else next(self._next_slot)
            self._slots.index = slot
        return slot

    def private_list(self, queue: str, slot: int) -> str:
        return CLUSTER.private_queue(queue, hostname(), self.pid, NONCE, slot)

    def unsure(self, private: str) -> None:
        """``private`` may hold a job no thread runs: the next fetch into it sweeps it first."""
        self._unsure.add(private)

    def _sweep(self, client: Any, name: str, private: str) -> None:
        """Move back onto queue ``name`` whatever ``private`` holds (this thread holds no job
        of that queue while it fetches), if a failed command left it unsure."""
        if private not in self._unsure:
            return
        moved = int(RECLAIM(client, keys=[private, CLUSTER.queue(name)]))
        self._unsure.discard(private)
        if moved:
            logger.warning("%d job(s) left in %s by a command that failed without a reply went back to queue %s",
                           moved, private, name)

    def _failed(self, name: str, private: str, exc: BaseException) -> None:
        self._outage.failed(exc)
        self._resting[name] = time.monotonic() + ERROR_BACKOFF
        if uncertain(exc):
            self.unsure(private)

    def _move(self, client: Any, name: str, private: str, block: float = 0.0) -> bytes | None:
        """``LMOVE`` from queue ``name`` into ``private``, or ``BLMOVE`` for ``block`` seconds."""
        self._sweep(client, name, private)
        if block:
            return client.blmove(CLUSTER.queue(name), private, block, "RIGHT", "LEFT")
        return client.lmove(CLUSTER.queue(name), private, "RIGHT", "LEFT")

    def retrieve_work(self) -> ClusterUnit | None:
        """The next job, or ``None`` when stopping, idle for one block timeout, or Redis failed."""
        if self._done.is_set():
            self._done.wait(0.05)
            return None
        slot = self._slot()
        now = time.monotonic()
        try:
            paused = self.paused.get()
        except FAULTS:
            # The flags live on every primary; one being failed over must not stop the
            # others' queues: go on with the flags last read (a rest, below, covers its queues).
            paused = self.paused.last()
        # A paused queue is skipped; a queue whose primary just failed rests a moment and
        # the others go on (module docstring).
        names = [name for name in self.order()
                 if name not in paused and self._resting.get(name, 0.0) <= now]
        if not names:
            # Every queue paused or resting: look again when the first rest ends, or after a
            # block's wait when none rests (paused queues only).
            ends = [until for until in self._resting.values() if until > now]
            self._done.wait(max(min(ends) - now, 0.05) if ends else BLOCK_SECONDS)
            return None
        client = self.redis()
        failed = False
        for name in names:
            private = self.private_list(name, slot)
            try:
                raw = self._move(client, name, private)
            except FAULTS as exc:
                self._failed(name, private, exc)
                failed = True
                continue
            if raw is not None:
                if not failed:
                    self._outage.succeeded()
                return ClusterUnit(name, raw, self, private)
        if failed:
            return None  # some queue failed: look at all of them again rather than block on one
        # While a queue rests, block no longer than its rest: it is asked again when the rest
        # ends, not a whole block timeout later (a failover's end is noticed sooner).
        ends = [until for until in self._resting.values() if until > now]
        block = BLOCK_SECONDS if not ends else max(0.1, min(float(BLOCK_SECONDS), min(ends) - now))
        name = names[next(self._turn) % len(names)]
        private = self.private_list(name, slot)
        try:
            raw = self._move(client, name, private, block=block)
        except FAULTS as exc:
            self._failed(name, private, exc)
            return None
        self._outage.succeeded()
        return None if raw is None else ClusterUnit(name, raw, self, private)

    def flush_acks(self) -> None:
        """Nothing is parked: each ACK is sent as the job settles."""

    def release_thread_connection(self) -> None:
        """A processor thread exits: its slot number is free for the next thread."""
        slot = getattr(self._slots, "index", None)
        if slot is not None:
            del self._slots.index
            with self._slot_lock:
                self._free.append(slot)

    def abandon(self, unit: ClusterUnit) -> None:
        """Nothing shared to take back: the job stays in its private list until settled or reaped."""

    def bulk_requeue(self, units: list[ClusterUnit]) -> None:
        """The hard-shutdown path: every job in flight back onto its queue."""
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
        """Jobs fetched and not started: none, this fetcher takes one job per fetch."""
        return 0

    def terminate(self) -> None:
        self._done.set()
