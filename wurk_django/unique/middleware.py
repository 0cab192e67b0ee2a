"""The server middleware of unique jobs: release the lock when the job ran (ENT-205); the
lock on push is :mod:`wurk_django.unique.client`'s."""

from __future__ import annotations

import logging
from typing import Any

from .. import context
from . import lock
from .client import UniqueClientMiddleware  # noqa: F401  (its old home: kept importable from here)

worker_logger = logging.getLogger("wurk_django.worker")


class UniqueServerMiddleware:
    """Releases the lock when the job starts (``unique_until="start"``) or after it
    succeeded (default); a failure keeps it, so retries stay unique.

    It releases even where ``UNIQUE_JOBS`` is off: the pusher (a Ruby process, or a
    Python one with the switch on) may have taken the lock, and nothing else would
    free it before ``unique_for`` runs out. The release deletes the lock only if this
    job holds it, so a job whose pusher took none costs one round trip and no more."""

    applies_key = "unique_for"  # applies() says no to a job without it

    @staticmethod
    def applies(job: dict) -> bool:
        return job.get("unique_for") is not None

    def __call__(self, instance: Any, job: dict, queue: str, call_next: Any) -> Any:
        where = context.current()  # the worker's config and the Redis the job came from
        if lock.stored_ttl(job.get("unique_for")) is None:
            return call_next()
        if job.get("unique_until") == lock.UNTIL_START:
            self.release(job, where.redis)
            return call_next()
        result = call_next()
        if where.outcome is None:  # it ran; a rescheduled or paused job keeps its lock for its next run
            self.release(job, where.redis)
        return result

    @staticmethod
    def release(job: dict, redis: Any) -> None:
        try:
            lock.release(job, redis)
        except Exception as exc:  # the TTL still bounds the lock
            worker_logger.warning("could not release the unique lock of %s jid=%s: %s: %s",
                                  job.get("class"), job.get("jid"), type(exc).__name__, exc)
