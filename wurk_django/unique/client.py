"""The unique jobs' client middleware: the lock taken on push (ENT-204).

Apart from the server middleware (:mod:`wurk_django.unique.middleware`), so a
process that only pushes loads nothing of the worker.
"""

from __future__ import annotations

import logging
from typing import Any

from .. import context, payload, testing
from ..client.arguments import check_arguments
from ..redis.cluster_layout import layout_of
from . import lock

logger = logging.getLogger("wurk_django.client.push")


class UniqueClientMiddleware:
    """Takes the job's lock before it is written; a live duplicate stops the push.

    Runs outside the batch middleware, so a dropped duplicate never joins a batch.
    """

    @staticmethod
    def applies(job: dict) -> bool:
        return job.get("unique_for") is not None

    def __call__(self, job_class: Any, job: dict, queue: str, redis: Any, call_next: Any) -> Any:
        if job.get("unique_for") is None:
            return call_next()
        ttl = lock.coerce_ttl(job["unique_for"])
        if ttl is None:
            return call_next()
        job["unique_for"] = ttl  # the payload carries whole seconds, whatever the caller gave
        lock.check_until(job.get("unique_until"))
        config = context.config()
        if redis is None or not lock.enabled(config) or testing.mode(config) in ("fake", "inline"):
            # Not enabled, or nothing will reach Redis (perform_inline, test modes): no lock.
            return call_next()
        if payload.truthy(job.get("encrypt")):
            # Each push encrypts to different bytes, so the lock could never match a duplicate.
            raise lock.UniqueConfigurationError(
                f"{job['class']}: a job cannot be both unique (unique_for) and encrypted (encrypt)")
        # The lock is keyed on the arguments exactly as they will be stored.
        job["args"] = check_arguments(job["class"], job["args"], config.on_complex_arguments)
        # On a Redis Cluster ``redis`` is the RedisCluster client: the lock goes into the slot
        # of the job's queue, where the push that follows lands too (issue 46 item 3).
        key = lock.lock_key(job, layout_of(redis))
        taken, holder = lock.acquire(redis, key, job["jid"], lock.lifetime(ttl, job.get("at")))
        if holder != job["jid"]:
            logger.info("duplicate %s dropped (jid=%s blocked by jid=%s)", job["class"], job["jid"], holder)
            return None
        try:
            result = call_next()
        except BaseException:
            if taken:
                _give_back(redis, key, job)
            raise
        if not result and taken:
            _give_back(redis, key, job)  # an inner middleware stopped the push
        return result


def _give_back(redis: Any, key: str, job: dict) -> None:
    """Release a lock taken for a push that did not happen; a failure here only logs
    (the lock then expires on its own) so the push's own error is what the caller sees."""
    try:
        lock.release_if_owner(redis, key, job["jid"])
    except Exception as exc:
        logger.warning("could not give back the unique lock of %s jid=%s: %s: %s",
                       job["class"], job["jid"], type(exc).__name__, exc)
