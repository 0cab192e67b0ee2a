"""Queue pausing: fetchers skip a paused queue, through a short per-fetcher cache (PRO-300, PRO-301, RUN-702).

``pause(name)`` adds the queue to the ``paused`` set; fetchers skip it for new
fetches while jobs already running finish. Each fetcher caches the set for at
most 2 s; a pause or unpause made in this process bumps a generation counter
that expires every fetcher's cache here at once.

On a Redis Cluster (issue 46 item 3) a queue's pause is a flag in the queue's own slot,
``{q:<name>}:paused`` (:mod:`wurk_django.redis.cluster_layout`), which the cluster fetcher
reads for its queues through the same cache; the functions here write and read it when
their Redis is a ``RedisCluster``, so the data API and the admin pause a queue there too.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import redis as redis_lib

from . import context, keys
from .conf import Config
from .redis.cluster_layout import layout_of
from .redis.connection import get_redis

PAUSED_KEY = keys.PAUSED
CACHE_TTL = 2.0

_generation = itertools.count(1)
_current_generation = 0
_lock = threading.Lock()


def _bump() -> None:
    global _current_generation
    with _lock:
        _current_generation = next(_generation)


def pause(name: str, redis: redis_lib.Redis | None = None) -> None:
    """Stop fetching from queue ``name`` (on every process, within 2 s)."""
    client = context.layout_redis(redis)
    layout = layout_of(client)
    if layout.cluster:
        client.set(layout.paused(name), "1")
    else:
        client.sadd(PAUSED_KEY, name)
    _bump()


def unpause(name: str, redis: redis_lib.Redis | None = None) -> None:
    client = context.layout_redis(redis)
    layout = layout_of(client)
    if layout.cluster:
        client.delete(layout.paused(name))
    else:
        client.srem(PAUSED_KEY, name)
    _bump()


def is_paused(name: str, redis: redis_lib.Redis | None = None) -> bool:
    """Always read from Redis: reporting paths never use the fetch cache."""
    client = context.layout_redis(redis)
    layout = layout_of(client)
    if layout.cluster:
        return bool(client.exists(layout.paused(name)))
    return bool(client.sismember(PAUSED_KEY, name))


def paused_among(client: Any, names: Iterable[str]) -> frozenset[str]:
    """Which of ``names`` are paused on the Redis Cluster ``client``: one ``EXISTS`` per
    queue flag, in one pipeline (one round trip per primary holding some)."""
    names = list(names)
    layout = layout_of(client)
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.exists(layout.paused(name))
    return frozenset(name for name, found in zip(names, pipe.execute(), strict=True) if found)


class PausedCache:
    """A fetcher's view of the ``paused`` set: at most ``CACHE_TTL`` seconds old."""

    def __init__(self, config: Config | None = None, read: Callable[[], Iterable[Any]] | None = None) -> None:
        self.config = config
        # How the paused names are read (a cluster fetcher reads its queues' flags): by
        # default the one-server ``paused`` set.
        self._read = read
        self._names: frozenset[str] = frozenset()
        self._read_at = -CACHE_TTL
        self._generation = -1
        self._pid = os.getpid()
        # One reader at a time: the fetching threads of a process find the cache expired
        # together, and each read it again (ten SMEMBERS where one does).
        self._reading = threading.Lock()

    def _fresh(self, now: float) -> bool:
        return (now - self._read_at < CACHE_TTL and self._generation == _current_generation
                and self._pid == os.getpid())

    def expire(self) -> None:
        """Read the set again on the next ``get``: Redis said it was written."""
        self._read_at = -CACHE_TTL

    def last(self) -> frozenset[str]:
        """The names of the last read that worked (empty before the first): what a fetcher
        goes on with while Redis cannot answer the read."""
        return self._names

    def get(self) -> frozenset[str]:
        if self._fresh(time.monotonic()):
            return self._names
        if self._pid != os.getpid():
            self._reading = threading.Lock()  # forked: the parent's reader may have held it
        with self._reading:
            now = time.monotonic()
            if self._fresh(now):  # another thread read it meanwhile
                return self._names
            generation = _current_generation
            members = self._read() if self._read is not None else get_redis(config=self.config).smembers(PAUSED_KEY)
            self._names = frozenset(m.decode() if isinstance(m, bytes) else m for m in members)
            self._read_at = now
            self._generation = generation
            self._pid = os.getpid()
            return self._names
