"""Where a profile goes: the ``profiles`` sorted set and one hash per profile (CORE-230)."""

from __future__ import annotations

import time
from typing import Any

EXPIRY = 86_400  # seconds a profile is kept


def store(redis: Any, *, token: str, jid: str, job_type: str, started_at: float, elapsed: float,
          data: bytes, now: float | None = None) -> str:
    """Write one profile in one MULTI; returns its key ``<token>-<jid>``."""
    now = time.time() if now is None else now
    key = f"{token}-{jid}"
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime(started_at))
    pipe = redis.pipeline(transaction=True)
    pipe.zadd("profiles", {key: now + EXPIRY})
    pipe.hset(key, mapping={
        "started_at": int(started_at), "token": token, "type": job_type, "jid": jid,
        "filename": f"{token}-{job_type}-{jid}-{stamp}.json.gz", "elapsed": round(elapsed, 6),
        "data": data, "size": len(data),
    })
    pipe.expire(key, EXPIRY)
    pipe.execute()
    return key
