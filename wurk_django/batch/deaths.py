"""The batch death handler: a batch job died (PRO-231).

Runs for every death the engine decides: retries exhausted, ``retry: false``
and a failure, a ``dead: false`` discard, a poison pill, a manual kill. The job
leaves the live set (so ``complete`` can fire) without leaving ``pending`` (so
``success`` cannot, unless a retry from the morgue later succeeds); the first
death of a batch fires its ``death`` callbacks (and its ancestors').
"""

from __future__ import annotations

import logging
import time
from typing import Any

from .. import context
from ..redis.cluster_layout import layout_of
from . import cluster, fire, scripts

logger = logging.getLogger("wurk_django.batch")

_ATTEMPTS = 3


def on_death(job: dict, exc: BaseException, reason: str) -> None:
    bid, jid = job.get("bid"), job.get("jid")
    if not bid or not jid:
        return
    bid = str(bid)
    where = context.current()  # the job's, or the one die() made for a death outside a job
    config, redis = where.config, where.redis
    attempt = 1
    while True:
        try:
            live, _died, first_death, kids, pending = scripts.ack_complete(redis, bid, str(jid))
            break
        except Exception:
            if attempt == _ATTEMPTS:
                raise
            time.sleep(0.05 * attempt)
            attempt += 1
    if live == -1:
        return  # the batch is gone
    # A death can come long after the batch was written: make sure nothing it
    # touched is left without a TTL, without extending a live clock.
    pipe = redis.pipeline(transaction=False)
    for key in layout_of(redis).batch_keys(bid):
        pipe.expire(key, scripts.DEFAULT_EXPIRY, nx=True)
    pipe.execute()
    # On a replay the first attempt may have counted the death already: the marker tells.
    if first_death == 1 or (attempt > 1 and not _death_claimed(redis, bid)):
        try:
            fire.fire_death(bid, config)
        except Exception:
            logger.exception("batch %s: could not fire its death callbacks", bid)
    fire.gate_reporting(bid, pending, live, kids, config)


def _death_claimed(redis: Any, bid: str) -> bool:
    """Whether the batch's ``death`` event was claimed: its marker, the batch's own key on one
    server, in the callback queue's slot on a Redis Cluster (issue 46 item 3)."""
    layout = layout_of(redis)
    if not layout.cluster:
        return bool(redis.exists(layout.batch(bid, "death")))
    queue = redis.hget(layout.batch(bid), "callback_queue")
    return cluster.fired(redis, bid, "death", queue.decode() if queue else "default")
