"""Unique locks by hand: see who holds a job's lock, and release one by its digest.

A lock lives at most ``unique_for`` seconds, but an operator sometimes cannot
wait: a job was deleted by hand, or a lock outlived its job. These are what the
admin's job pages and the data API use.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from ..payload import truthy
from ..redis.cluster_layout import layout_of
from ..text import to_text
from . import lock

logger = logging.getLogger("wurk_django")

_DIGEST = re.compile(r"^[0-9a-f]{64}$")


def digest_of(job: dict) -> str | None:
    """The lock digest of a payload that asks for a unique lock, else ``None``."""
    if not isinstance(job, dict) or lock.stored_ttl(job.get("unique_for")) is None or truthy(job.get("encrypt")):
        return None
    return lock.lock_key(job).rpartition(":")[2]


def holder(redis: Any, digest: str, queue: str | None = None) -> str | None:
    """The jid holding the lock ``digest``, or ``None`` when it is free (``queue``: the
    job's queue, needed on a Redis Cluster, where the lock lives in the queue's slot)."""
    return to_text(redis.get(_key(redis, digest, queue)))


def release_digest(redis: Any, digest: str, queue: str | None = None) -> bool:
    """Delete the lock ``digest`` whoever holds it; True when there was one.

    Raises ``ValueError`` for anything but 64 lowercase hex digits (a lock key's own
    shape), so a typo cannot delete another key; on a Redis Cluster also without
    ``queue`` (the job's queue: its lock lives in that queue's slot)."""
    return bool(redis.delete(_key(redis, digest, queue)))


def _key(redis: Any, digest: str, queue: str | None) -> str:
    layout = layout_of(redis)
    if layout.cluster and not queue:
        raise ValueError("on a Redis Cluster a unique lock lives in its queue's slot: name the job's queue")
    return layout.unique_lock(queue or "", _checked(digest))


def release_for(redis: Any, job: dict) -> bool:
    """Free ``job``'s lock if that job itself holds it (a deleted job's lock must not
    block the next push; a newer job's lock is left alone)."""
    digest = digest_of(job)
    if digest is None or not job.get("jid"):
        return False
    return lock.release_if_owner(redis, lock.lock_key(job, layout_of(redis)), str(job["jid"]))


def release_deleted(redis: Any, job: dict | None) -> None:
    """After a unique job was deleted by hand: free the lock it held. A failure only logs
    (the lock expires on its own), so the delete itself still counts."""
    if not job or job.get("unique_for") is None:
        return
    try:
        release_for(redis, job)
    except Exception as exc:
        logger.warning("could not release the unique lock of jid=%s: %s: %s", job.get("jid"), type(exc).__name__, exc)


def _checked(digest: str) -> str:
    if not isinstance(digest, str) or not _DIGEST.match(digest):
        raise ValueError(f"a unique lock digest is 64 lowercase hex digits, not {digest!r}")
    return digest
