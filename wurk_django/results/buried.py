"""Result records of jobs another runtime buried (issue 43 item 9).

A Celery-style task or a ``django.tasks`` task keeps a result record
(``status:<jid>``, :mod:`.store`) that our workers update as the
job runs, fails and dies. A Ruby Sidekiq process that takes such a job (a queue
both languages serve) fails it (``NameError: uninitialized constant``), retries it
and finally moves it to the dead set without a word to the record, which stayed
PENDING for ever. This sweep reads the dead-set entries added since the last
sweep (by score: when each died) and marks each record still waiting or running
(``enqueued``, ``scheduled``, ``interrupted``, ``running``, ``retrying``) ``failed`` (FAILURE to
Celery, FAILED to ``django.tasks``), with the entry's error appended, through the one
writer (:func:`.record.buried_elsewhere`).

It runs on the reaper's interval in the process that sweeps the private lists,
so once per interval across the cluster, and reads only the new entries: one
``GET`` and one ``ZRANGEBYSCORE`` when none died. A job one of our processes buried
has its record updated by that process; entries younger than :data:`SETTLE`
seconds are left to the next sweep, so that process's own write comes first and
the error is not appended twice.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from .. import keys, payload
from . import record

logger = logging.getLogger("wurk_django.worker")

SETTLE = 5.0  # seconds a dead entry waits before the sweep reads it
FIRST_LOOK = 3600.0  # how far back the first sweep of a database reads
BATCH = 500  # entries read per sweep at most; the rest wait for the next
MARK_TTL = 30 * 86400


def sweep(redis: Any, now: float | None = None) -> int:
    """Mark ``dead`` the open records of jobs buried since the last sweep; returns how many."""
    now = time.time() if now is None else now
    mark = redis.get(keys.BURIED_SWEPT)
    start = float(mark) if mark is not None else now - FIRST_LOOK
    until = now - SETTLE
    if until <= start:
        return 0
    # Inclusive of the mark: an entry with the mark's own score is read again, harmlessly.
    entries = redis.zrangebyscore(keys.DEAD, start, until, start=0, num=BATCH, withscores=True)
    marked = 0
    last = until
    for raw, _score in entries:
        try:
            marked += _settle(redis, raw)
        except Exception:
            logger.exception("could not mark the result record of a buried job")
    if len(entries) == BATCH:
        last = entries[-1][1]  # more to read: from there next time
    redis.set(keys.BURIED_SWEPT, repr(last), ex=MARK_TTL)
    return marked


def _settle(redis: Any, raw: bytes) -> int:
    try:
        job = payload.loads(raw)
    except Exception:
        return 0
    if not record.keeps_record(job):
        return 0
    error_class = str(job.get("error_class") or "unknown")
    message = str(job.get("error_message") or "")
    error = {"exception_class_path": error_class, "message": message,
             "traceback": f"{error_class}: {message}\n(moved to the dead set by a process that is not wurk_django)"}
    died = payload.epoch_seconds(job.get("failed_at"))
    if not record.buried_elsewhere(redis, job, error, int(died * 1000) if died else payload.now_ms()):
        return 0
    logger.warning("the result record of %s (jid %s) is marked failed: the job was buried (%s: %s) by a process "
                   "that does not update it", job.get("class"), job["jid"], error_class, message)
    return 1
