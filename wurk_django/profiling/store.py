"""Where a profile goes: the ``profiles`` sorted set and one hash per profile (CORE-230)."""

from __future__ import annotations

import time
from typing import Any

from ..redis.cluster_layout import layout_of
from ..redis.layout_client import one_slot

EXPIRY = 86_400  # seconds a profile is kept


def store(redis: Any, *, token: str, jid: str, job_type: str, started_at: float, elapsed: float,
          data: bytes, now: float | None = None) -> str:
    """Write one profile in one MULTI; returns its key ``<token>-<jid>``.

    On a Redis Cluster (issue 46 item 3; ``redis`` a ``RedisCluster``) the index is
    ``{wurk}:profiles`` and the hash is in a slot of its own: the hash (with its expiry) is
    written first, in one MULTI on its node, then the index entry. A crash between the two
    leaves an unlisted hash that expires with its TTL; the index never names a profile that
    was not written (a reader skips one that expired)."""
    now = time.time() if now is None else now
    key = f"{token}-{jid}"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started_at))
    fields = {
        "started_at": int(started_at), "token": token, "type": job_type, "jid": jid,
        "filename": f"{token}-{job_type}-{jid}-{stamp}.json.gz", "elapsed": round(elapsed, 6),
        "data": data, "size": len(data),
    }
    layout = layout_of(redis)
    if layout.cluster:
        pipe = one_slot(redis, key).pipeline(transaction=True)
        pipe.hset(key, mapping=fields)
        pipe.expire(key, EXPIRY)
        pipe.execute()
        redis.zadd(layout.profiles, {key: now + EXPIRY})
        return key
    pipe = redis.pipeline(transaction=True)
    pipe.zadd("profiles", {key: now + EXPIRY})
    pipe.hset(key, mapping=fields)
    pipe.expire(key, EXPIRY)
    pipe.execute()
    return key
