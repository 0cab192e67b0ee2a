"""The dead set (the morgue): where jobs go when they will not be retried (CORE-140/141)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import redis as redis_lib

from . import payload

logger = logging.getLogger("wurk_django.dead")


def bury(client: redis_lib.Redis | Any, raw: bytes | str, *, max_jobs: int, timeout: int,
         trim: bool = True, now: float | None = None) -> None:
    """``ZADD dead`` plus both trims in one MULTI (CORE-140).

    The rank trim is issued exactly as Sidekiq does (``0 .. -max_jobs``), which
    keeps at most ``max_jobs - 1`` entries.
    """
    now = time.time() if now is None else now
    pipe = client.pipeline(transaction=True)
    pipe.zadd("dead", {raw: now})
    if trim:
        pipe.zremrangebyscore("dead", "-inf", now - timeout)
        pipe.zremrangebyrank("dead", 0, -max_jobs)
    pipe.execute()


def run_death_handlers(handlers: Iterable[Callable[[dict, BaseException], Any]], job: dict,
                       exc: BaseException) -> None:
    """Call every death handler; one that fails is logged and the rest still run (CORE-126)."""
    for handler in handlers:
        try:
            handler(job, exc)
        except Exception:
            logger.exception("death handler %r failed for job %s", handler, job.get("jid"))


def parse_or_raw(raw: bytes | str) -> dict:
    try:
        job = payload.loads(raw)
    except Exception:  # unparseable data is shown as it is
        job = None
    if not isinstance(job, dict):
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        return {"args": [text]}
    return job
