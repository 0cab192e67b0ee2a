"""Queue limits on a Redis Cluster (issue 46 item 3).

On one server the fetch takes a capped queue's job and its slot in one script over
several queues (``lua/fetch.lua``). On a cluster a script touches one hash slot, and
each queue has its own (``{q:<name>}``, :mod:`wurk_django.redis.cluster_layout`): so
the cap's hash is ``{q:<name>}:limit``, in the queue's slot, beside the queue and the
private lists, and one script per queue (``lua/cluster_fetch.lua``) checks the cap,
moves the job and counts its slot. The field is the private list, as on one server:
it names the process that runs the job.

* :class:`CappedClusterFetch` is the cluster fetcher with that script for capped
  queues (an uncapped queue is fetched as before). A capped queue is never fetched by
  a blocking ``BLMOVE`` (it would take a job without its slot): an idle thread whose
  turn is a capped queue asks it every :data:`CAPPED_POLL` seconds for its block's time;
* a :class:`CappedClusterUnit` frees its slot once its run is settled, or once it goes
  back unrun (``lua/cluster_release.lua``, one key); a release Redis refuses is kept and
  sent again by the next release or the keeper's tick;
* :class:`ClusterKeeper`, the worker component on a cluster, frees every
  ``reaper_interval`` the slots of processes the cluster reaper finds dead (its hash
  expired, its pid gone; a fork sibling's pid gone: :func:`.cluster_reaper.alive`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from typing import Any

from redis.exceptions import RedisClusterException, RedisError

from ..redis.cluster_layout import CLUSTER
from ..redis.scripts import lua
from ..server.fetch.cluster import ClusterFetch, ClusterUnit

logger = logging.getLogger("wurk_django.worker")

FETCH = lua("queue_limits/lua/cluster_fetch")
RELEASE = lua("queue_limits/lua/cluster_release")
#: Seconds between two looks at a capped queue by an idle thread (no blocking fetch there).
CAPPED_POLL = 0.25

# Releases Redis refused: (client, queue, field), sent again before the next release.
_unsent: deque[tuple[Any, str, str]] = deque()
_unsent_lock = threading.Lock()


def _send(client: Any, releases: list[tuple[str, str]]) -> None:
    """Free each (queue, field) of ``releases``, with any kept from before; keep what fails."""
    pending: list[tuple[Any, str, str]] = []
    with _unsent_lock:
        while _unsent:
            pending.append(_unsent.popleft())
    pending += [(client, queue, field) for queue, field in releases]
    failed = []
    for owner, queue, field in pending:
        try:
            RELEASE(owner, keys=[CLUSTER.queue_limit(queue)], args=[field, 1])
        except (RedisError, RedisClusterException) as exc:
            failed.append((owner, queue, field))
            logger.warning("could not free a slot of capped queue %s (%s); will try again", queue, exc)
    if failed:
        with _unsent_lock:
            _unsent.extend(failed)


class CappedClusterUnit(ClusterUnit):
    """A job of a capped queue fetched on a cluster, holding a slot (``cap``: the field)
    until :func:`wurk_django.queue_limits.caps.release` frees it."""

    __slots__ = ("cap",)

    def __init__(self, unit: ClusterUnit) -> None:
        super().__init__(unit.queue, unit.job, unit.fetcher, unit.private, unit.slot, unit.faults)
        self.cap: str | None = unit.private

    def free_cap(self, field: str) -> None:
        """What :func:`~wurk_django.queue_limits.caps.release` calls for a cluster unit."""
        _send(self.fetcher.redis(), [(self.queue, field)])

    def requeue(self) -> None:
        """Back onto its queue unrun, its slot freed (a hard shutdown's requeue too)."""
        try:
            super().requeue()
        finally:
            from .caps import release

            release(self)


class CappedClusterFetch(ClusterFetch):
    """The cluster fetcher honouring ``QUEUE_LIMITS`` (this module's docstring)."""

    def __init__(self, config: Any, client: Any = None) -> None:
        super().__init__(config, client)
        limits = getattr(config, "queue_limits", None) or {}
        self.limits = {name: int(limits[name]) for name in self.order.names if name in limits}

    def _fetch(self, client: Any, slot: Any, name: str, count: int) -> list[ClusterUnit]:
        """A capped queue gives one job per fetch, with its slot (never several ahead: each
        job fetched takes a slot, and a job waiting in a thread would hold one idle). The
        thread's parked ACKs of the queue and a sweep of its list go first, moving nothing."""
        limit = self.limits.get(name)
        if limit is None:
            return super()._fetch(client, slot, name, count)
        private = self.private_list(name, slot.number)
        if private in slot.parked or private in self._unsure:
            super()._fetch(client, slot, name, 0)
        faults = self._faults.get(name, 0)
        try:
            raw = FETCH(client, keys=[CLUSTER.queue(name), private, CLUSTER.queue_limit(name)], args=[limit])
        except Exception as exc:
            self._failed(name, private, exc, script=True)
            raise
        return [] if raw is None else [ClusterUnit(name, raw, self, private, slot, faults)]

    def _block(self, client: Any, slot: Any, name: str, block: float) -> ClusterUnit | None:
        """A capped queue is never waited on by a blocking move (it would take a job without
        its slot): it is asked every :data:`CAPPED_POLL` seconds for the block's time."""
        if name not in self.limits:
            return super()._block(client, slot, name, block)
        deadline = time.monotonic() + block
        while True:
            units = self._fetch(client, slot, name, 0)
            if units or self._done.is_set():
                return units[0] if units else None
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self._done.wait(min(CAPPED_POLL, left))

    def retrieve_work(self) -> ClusterUnit | None:
        unit = super().retrieve_work()
        if unit is not None and unit.queue in self.limits:
            return CappedClusterUnit(unit)
        return unit


def free_dead(client: Any, names: list[str]) -> int:
    """Free the slots of capped queues ``names`` held by processes the cluster reaper
    finds dead; how many fields went. A dead process cannot take or free a slot, so
    deleting its fields races with nobody."""
    from ..server import cluster_reaper

    alive: dict[str, bool] = {}
    freed = 0
    for name in names:
        key = CLUSTER.queue_limit(name)
        dead = []
        for raw in client.hkeys(key):
            field = raw.decode() if isinstance(raw, bytes) else raw
            parsed = cluster_reaper.parse(field)
            if parsed is None:
                dead.append(raw)  # not a private list: nobody will ever free it
                continue
            owner = parsed[1]
            if owner not in alive:
                alive[owner] = cluster_reaper.alive(client, owner)
            if not alive[owner]:
                dead.append(raw)
        if dead:
            freed += int(client.hdel(key, *dead) or 0)
            logger.info("freed %d slot(s) of capped queue %s held by processes that are gone", len(dead), name)
    return freed


class ClusterKeeper:
    """The worker component on a cluster: frees the slots of dead processes, and sends
    again the releases Redis refused, every ``reaper_interval`` (and soon after boot)."""

    def __init__(self, worker: Any, names: list[str]) -> None:
        from ..server.timer import TimerLoop

        self.client = worker.client
        self.names = names
        interval = float(worker.config.reaper_interval)
        self.loop = TimerLoop("wurk-queue-limits", self.tick, lambda: interval, first_wait=min(interval, 1.0))

    def tick(self) -> None:
        _send(self.client, [])
        free_dead(self.client, self.names)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()
