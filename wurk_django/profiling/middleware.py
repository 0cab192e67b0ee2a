"""The server middleware that profiles jobs pushed with a ``profile`` token."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from .. import context

logger = logging.getLogger("wurk_django.worker")

MIN_INTERVAL = 0.0005


class ProfileMiddleware:
    applies_key = "profile"  # applies() says no to a job without it

    @staticmethod
    def applies(job: dict) -> bool:
        # Only a job pushed with a profile token is profiled; the rest skip this layer.
        return bool(job.get("profile"))

    def __call__(self, instance: Any, job: dict, queue: str, call_next: Callable[[], Any]) -> Any:
        token = job.get("profile")
        if not token:
            return call_next()
        if not isinstance(token, str) or not job.get("jid"):
            logger.warning("job %s has a profile value %r that is not a text token; running it unprofiled",
                           job.get("jid"), token)
            return call_next()
        # Here, not at the top: the sampler and the profile format load in a worker only
        # once a job asks to be profiled, not on the way to its first job.
        from .gecko import build, to_gzip
        from .sampler import Sampler
        from .store import store

        options = job.get("profiler_options") if isinstance(job.get("profiler_options"), dict) else {}
        interval = options.get("interval", 0.001)
        if not isinstance(interval, (int, float)) or isinstance(interval, bool) or interval < MIN_INTERVAL:
            interval = 0.001
        sampler = Sampler(interval=float(interval))
        with sampler:
            result = call_next()  # a job that raises is not profiled (only successful runs are kept)
        where = context.current()  # the worker's Redis: the profile is kept beside the job
        if where.outcome is not None:
            return result  # rescheduled or paused: not a successful run either
        job_type = str(job.get("wrapped") or job.get("class"))
        try:
            data = to_gzip(build(sampler, job_type))
            key = store(where.redis, token=token, jid=str(job["jid"]), job_type=job_type,
                        started_at=sampler.started_at, elapsed=sampler.elapsed, data=data)
            logger.info("profiled %s jid=%s: %d samples, %d bytes stored as %s", job_type, job["jid"],
                        len(sampler.samples), len(data), key)
        except Exception:
            logger.exception("could not store the profile of job %s; the job itself succeeded", job.get("jid"))
        return result
