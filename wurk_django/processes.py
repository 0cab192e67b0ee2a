"""Pruning the ``processes`` set: identities whose heartbeat hash expired (CORE-061, CORE-147, CORE-167).

A process that dies without deregistering leaves its identity in ``processes``;
its heartbeat hash expires a minute later, and then nothing but this prune
removes the identity. The scheduler prunes once at boot; the data API's
``ProcessSet(clean=True)`` uses the same function. At most once a minute
cluster-wide (the ``process_cleanup`` lock), in batches of 100.
"""

from __future__ import annotations

from typing import Any

from . import keys

CLEANUP_LOCK_TTL = 60  # prune ``processes`` at most once a minute across the cluster
BATCH = 100


def prune_processes(redis: Any) -> int:
    """Drop identities whose heartbeat hash has no ``info``; returns how many were removed
    (0 when another process pruned within the last minute)."""
    if not redis.set(keys.PROCESS_CLEANUP, "1", nx=True, ex=CLEANUP_LOCK_TTL):
        return 0
    removed = 0
    batch: list[bytes] = []
    for identity in redis.sscan_iter(keys.PROCESSES):
        batch.append(identity)
        if len(batch) == BATCH:
            removed += _prune(redis, batch)
            batch = []
    if batch:
        removed += _prune(redis, batch)
    return removed


def _prune(redis: Any, identities: list[bytes]) -> int:
    pipe = redis.pipeline(transaction=False)
    for identity in identities:
        pipe.hget(keys.process(identity), "info")
    infos = pipe.execute()
    dead = [identity for identity, info in zip(identities, infos, strict=True) if info is None]
    return int(redis.srem(keys.PROCESSES, *dead)) if dead else 0
