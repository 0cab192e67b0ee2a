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

Not here yet (refused at boot on a cluster, see ``wurk_django.server.cluster_boot``):
fetching ahead, queue caps, the push watch. Outside a cluster this
module is never imported: the one-server fetchers are unchanged.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from typing import Any

import redis as redis_lib

from ...conf import Config
from ...pause import PausedCache, paused_among
from ...redis.cluster_layout import CLUSTER
from ...redis.scripts import lua
from ..outage import OutageLog
from ..state import NONCE, hostname
from .queues import QueueOrder

logger = logging.getLogger("wurk_django.worker")

#: Seconds an idle thread blocks on one queue before it looks at all of them again.
BLOCK_SECONDS = 1
ERROR_BACKOFF = 1.0
REQUEUE = lua("cluster_requeue")


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
        """The job is done, or its outcome is booked: out of the private list."""
        self.fetcher.redis().lrem(self.private, 1, self.job)

    def requeue(self) -> None:
        """Back onto the fetch end of its queue, unrun (private list -> queue, one step)."""
        REQUEUE(self.fetcher.redis(), keys=[self.private, self.queue_key], args=[self.job])


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
        self._outage = OutageLog("fetch", f", retrying every {ERROR_BACKOFF:g}s")
        self.pid = os.getpid()
        self.paused = PausedCache(config, read=lambda: paused_among(self.redis(), self.order.names))

    def redis(self) -> Any:
        if self._client is None:
            with self._client_lock:
                if self._client is None:
                    from ...redis.cluster import cluster_client
                    from ...redis.connection import READ_TIMEOUT

                    self._client = cluster_client(self.config, socket_timeout=READ_TIMEOUT + BLOCK_SECONDS)
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

    def retrieve_work(self) -> ClusterUnit | None:
        """The next job, or ``None`` when stopping, idle for one block timeout, or Redis failed."""
        if self._done.is_set():
            self._done.wait(0.05)
            return None
        slot = self._slot()
        client = self.redis()
        try:
            paused = self.paused.get()
            names = [name for name in self.order() if name not in paused] if paused else self.order()
            if not names:
                self._done.wait(BLOCK_SECONDS)  # every queue paused: look again after a block's wait
                return None
            for name in names:
                private = self.private_list(name, slot)
                raw = client.lmove(CLUSTER.queue(name), private, "RIGHT", "LEFT")
                if raw is not None:
                    self._outage.succeeded()
                    return ClusterUnit(name, raw, self, private)
            name = names[next(self._turn) % len(names)]
            private = self.private_list(name, slot)
            raw = client.blmove(CLUSTER.queue(name), private, BLOCK_SECONDS, "RIGHT", "LEFT")
        except redis_lib.RedisError as exc:
            self._outage.failed(exc)
            self._done.wait(ERROR_BACKOFF)
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
