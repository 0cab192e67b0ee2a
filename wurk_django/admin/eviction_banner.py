"""The banner every Wurk page shows while Redis may evict keys (issue 43 item 3).

A Redis whose ``maxmemory-policy`` is not ``noeviction`` deletes keys at its
``maxmemory``, queues included, and nothing else on the page would say so. The
banner names the policy and the ``evicted_keys`` count; ``WURK["ALLOW_EVICTION"] =
True`` turns it off. Each page reads Redis's ``INFO`` for it at most once per
:data:`CACHE_SECONDS` per process and Redis (one round trip), so the banner costs a
page nothing most of the time.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import redis as redis_lib

from .. import context
from ..redis import eviction

#: How long one INFO reading serves the banner.
CACHE_SECONDS = 30.0

_lock = threading.Lock()
_read: dict[str, tuple[float, str | None, int | None]] = {}  # Redis identity: (read at, policy, evicted)


def _reading(identity: str) -> tuple[str | None, int | None]:
    now = time.monotonic()
    with _lock:
        cached = _read.get(identity)
    if cached is not None and now - cached[0] < CACHE_SECONDS:
        return cached[1], cached[2]
    try:
        policy, evicted = _state()
    except redis_lib.RedisError:
        policy, evicted = None, None  # the page's own reads report an unreachable Redis
    with _lock:
        _read[identity] = (now, policy, evicted)
    return policy, evicted


def _state() -> tuple[str | None, int | None]:
    """The policy and ``evicted_keys``; on a Redis Cluster, read on every primary: the
    first evicting policy found (else the first one), and the keys evicted summed."""
    from .common import servers

    readings = [eviction.state(client) for client in servers()]
    policies = [policy for policy, _evicted in readings]
    policy = next((p for p in policies if eviction.evicting(p)), policies[0] if policies else None)
    counts = [evicted for _policy, evicted in readings if evicted is not None]
    return policy, (sum(counts) if counts else None)


def notice() -> dict[str, Any] | None:
    """``{"policy": ..., "evicted": ...}`` while the Redis the page shows may evict keys
    and ``ALLOW_EVICTION`` is not True, else None."""
    config = context.config()
    if config.allow_eviction:
        return None
    policy, evicted = _reading(config.redis_target.identity)
    if not eviction.evicting(policy):
        return None
    return {"policy": policy, "evicted": evicted}


def forget() -> None:
    """Drop the cached readings (tests)."""
    with _lock:
        _read.clear()
