"""The batch server middleware: acking batch jobs (PRO-230, PRO-232); stamping pushes with the open
batch is :mod:`wurk_django.batch.client`'s."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .. import context as job_context
from ..errors import caused_by_shutdown
from ..redis.cluster_layout import layout_of
from ..redis.errors import ride_out
from . import context, fire, scripts
from .client import BatchClientMiddleware  # noqa: F401  (its old home: kept importable from here)
from .fire import CALLBACK_CLASS

logger = logging.getLogger("wurk_django.batch")



class BatchServerMiddleware:
    """Runs a batch job and records its outcome in the batch, then runs the fire gate.

    * success: the jid leaves the live set (``pending`` -1); the gate may fire;
    * failure: the jid joins the failed set (the retry layer books the retry);
      a death is recorded by the death handler;
    * an invalidated batch: the job is not run and counts as a success
      (callback jobs always run);
    * a run that ended another way (``ctx.outcome`` set by an inner layer: a
      limiter's reschedule, an iterable job pausing) or a shutdown: nothing is
      recorded; the job stays a live member and its next run is the one that counts.

    It runs only for batch jobs (``applies``): a batch opened inside any other job
    names its hold after that job's jid from the job's context
    (:func:`~wurk_django.batch.context.job_jid`), so a plain job pays nothing here.
    """

    applies_key = "bid"  # applies() says no to a job without it

    @staticmethod
    def applies(job: dict) -> bool:
        return bool(job.get("bid"))

    def __call__(self, instance: Any, job: dict, queue: str, call_next: Callable[[], Any]) -> Any:
        token = context.current_jid.set(job.get("jid"))
        try:
            bid = job.get("bid")
            if not bid:
                return call_next()
            return self._run(str(bid), job, call_next)
        finally:
            context.current_jid.reset(token)

    def _run(self, bid: str, job: dict, call_next: Callable[[], Any]) -> Any:
        # The worker's config and the Redis the job came from: a worker on a shard acks there.
        where = job_context.current()
        config, redis = where.config, where.redis
        jid = job.get("jid") or ""
        result = None
        if job.get("class") != CALLBACK_CLASS and redis.hget(layout_of(redis).batch(bid), "invalidated") == b"1":
            logger.info("batch %s was invalidated: skipping %s jid=%s", bid, job.get("class"), jid)
        else:
            try:
                result = call_next()
            except BaseException as exc:
                # The job's own failure. A shutdown ends no run: the job runs again after the
                # restart, and that run counts.
                if not caused_by_shutdown(exc):
                    try:
                        scripts.ack_failed(redis, bid, jid)
                    except Exception:
                        logger.exception("batch %s: could not record the failure of jid=%s", bid, jid)
                raise
            if where.outcome is not None:
                return result  # rescheduled or paused: it runs again, and that run counts
        # Outside the job's error handling. The job ran: a failover or a short outage is
        # waited out (the script is safe to repeat) rather than booked as its failure; if
        # Redis stays down this raises and the job is retried (it is still a live member,
        # so the retry counts once).
        _removed, pending, live, kids = ride_out(lambda: scripts.ack_success(redis, bid, jid),
                                                 f"batch {bid}: acknowledging jid={jid}")
        fire.gate_reporting(bid, pending, live, kids, config)
        return result
