"""What happens when a job hits a rate limit: it is rescheduled, not failed.

A job that raises :class:`OverLimit` (or one of ``WURK["LIMITER_ERRORS"]``)
is pushed again for later with the same jid, its ``overrated`` count one
higher, and the current run ends as handled: acknowledged, with no retry and
no failure booked. After ``reschedule`` such rounds (the limiter's option,
else 20) the job stops bouncing: by default it goes to the dead set with a
``rate_limited:`` message; with ``LIMITER_CAP_ACTION="retry"`` it enters the
normal retry pipeline instead. A limiter with ``reschedule=0`` never
reschedules: its ``OverLimit`` is an ordinary failure.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any

from django.utils.module_loading import import_string

from .. import context, death, signals
from ..client.push import Client
from ..conf import Config
from ..errors import error_class_name
from ..outcome import Outcome
from .base import OverLimit
from .options import DEFAULT_RESCHEDULE

logger = logging.getLogger("wurk_django.limiter")

#: Prefix of the dead-set message of a job that was still rate limited at the cap.
DEAD_REASON = "rate_limited"


def default_backoff(_limiter: Any, job: dict, _exc: BaseException) -> float:
    """Five minutes more for each time the job was already rate limited, plus up to
    five minutes of jitter so a crowd of limited jobs does not return at once."""
    return 300 * int(job.get("overrated", 0)) + random.randint(0, 299) + 1


def _load(entry: Any) -> Any:
    return import_string(entry) if isinstance(entry, str) else entry


def _listed(exc: Exception, config: Config) -> bool:
    """Is ``exc`` one of ``WURK["LIMITER_ERRORS"]``? Any job failure passes through
    here, so a worker run from a bare Config (no Django settings) is not made to read
    settings for it: without settings there is no such list."""
    from django.conf import settings

    if not settings.configured:
        return False
    extra = config.limiter_errors or ()
    return bool(extra) and isinstance(exc, tuple(_load(e) for e in extra))


def _backoff(limiter: Any, config: Config) -> Callable[[Any, dict, BaseException], float]:
    own = getattr(limiter, "options", {}).get("backoff") if limiter is not None else None
    if own is not None:
        return own
    configured = config.limiter_backoff
    return _load(configured) if configured else default_backoff


def cap_of(limiter: Any) -> int:
    """How many times a job may be rescheduled for ``limiter`` (None: an error class
    that carries no limiter, which gets the default)."""
    cap = getattr(limiter, "options", {}).get("reschedule") if limiter is not None else None
    return DEFAULT_RESCHEDULE if cap is None else int(cap)


def rate_limited(exc: BaseException, job: dict, config: Config) -> bool:
    """Will :class:`LimiterMiddleware` end this run as rate limited (rescheduled, or dead at
    the cap)? False when it lets ``exc`` through as an ordinary failure. For the layers
    inside it, which see the exception before it does (statsd's ``jobs.rate_limited``)."""
    if not isinstance(exc, Exception) or not (isinstance(exc, OverLimit) or _listed(exc, config)):
        return False
    cap = cap_of(getattr(exc, "limiter", None))
    if cap == 0:
        return False
    at_cap = int(job.get("overrated", 0) or 0) + 1 >= cap
    return not (at_cap and config.limiter_cap_action == "retry")


class LimiterMiddleware:
    """Server middleware: reschedule a job that ran into a rate limit."""

    def __call__(self, instance: Any, job: dict, queue: str, call_next: Callable[[], Any]) -> Any:
        try:
            return call_next()
        except Exception as exc:
            if not self.rescue(exc, instance, job, queue):
                raise
            return None

    def rescue(self, exc: Exception, instance: Any, job: dict, queue: str) -> bool:
        """The inner layers raised ``exc``: True once a rate limit's is handled (the run's
        outcome set), False for any other error. The server chain calls this directly,
        so a job that does not raise pays nothing for this middleware."""
        where = context.current()  # the worker's config and the Redis the job came from
        if not (isinstance(exc, OverLimit) or _listed(exc, where.config)):
            return False
        where.outcome = self.handle(exc, job, queue, where)
        return True

    def handle(self, exc: Exception, job: dict, queue: str, where: context.JobContext) -> Outcome:
        """Reschedule ``job`` (or end it at the cap); the outcome of this run, or ``exc``
        raised again when the limiter wants an ordinary failure."""
        config = where.config
        job["overrated"] = int(job.get("overrated", 0) or 0) + 1
        try:
            exc.job = job  # error handlers can see which job was limited
        except AttributeError:
            pass
        limiter = getattr(exc, "limiter", None)
        cap = cap_of(limiter)
        if cap == 0:
            raise exc  # this limiter asked for no rescheduling: an ordinary failure
        if job["overrated"] >= cap:
            return self.at_cap(exc, job, where)
        try:
            delay = float(_backoff(limiter, config)(limiter, job, exc))
        except Exception:
            logger.exception("limiter backoff failed for job %s; using the default", job.get("jid"))
            delay = default_backoff(limiter, job, exc)
        # Through the client: its middleware runs again (the arguments are encrypted
        # again, the unique lock is checked against this same jid), and the write path
        # stores it in the schedule set.
        again = {**job, "at": time.time() + max(delay, 0.0)}
        again.pop("enqueued_at", None)
        Client(config=config).push(again)
        signals.send(signals.job_rate_limited, job.get("class"), job=job, exception=exc, retry_at=again["at"])
        logger.info("%s jid=%s rate limited by %s (overrated=%d); runs again in %.1fs", job.get("class"),
                    job.get("jid"), getattr(limiter, "name", type(exc).__name__), job["overrated"], delay)
        return Outcome.RESCHEDULED  # acknowledged, with no failure and no retry booked

    def at_cap(self, exc: Exception, job: dict, where: context.JobContext) -> Outcome:
        if where.config.limiter_cap_action == "retry":
            raise exc  # Sidekiq Enterprise's behaviour: the normal retry pipeline
        # A job still limited after this many rounds is saturating the limiter; more
        # rounds (or 25 retries on top) would only add load. Stop it, visibly.
        logger.warning("%s jid=%s still rate limited after %d reschedules: moved to the dead set",
                       job.get("class"), job.get("jid"), job["overrated"])
        # Stored as fetched (an encrypted argument stays sealed), with the count and the reason.
        death.die_as_fetched(where, exc, reason=death.EXHAUSTED, job=job, overrated=job["overrated"],
                             error_class=error_class_name(exc),
                             error_message=f"{DEAD_REASON}: {exc} (overrated={job['overrated']})",
                             failed_at=where.config.wire_format.now())
        # Statsd's jobs.rate_limited counter (tagged worker:<class>) hangs off this signal.
        signals.send(signals.job_rate_limited, job.get("class"), job=job, exception=exc, retry_at=None)
        return Outcome.DEAD
