"""Retries: booking a failed job into the ``retry`` set, or burying it (CORE-120..131).

A failure is booked with the job class when one was resolved (its options and
hooks apply, Sidekiq's *local* scope) or from the payload alone when it failed
before a class existed (an unknown class name, a bad payload: the *global*
scope). :meth:`Retrier.book` does both and says how it ended, as an
:class:`~wurk_django.outcome.Outcome`.

Booking starts from a fresh parse of the bytes that were fetched, so whatever a
middleware changed in memory never leaks into the stored retry.
"""

from __future__ import annotations

import logging
import random
import time
from typing import Any

import redis as redis_lib

from .. import backtrace, keys, payload, signals
from .. import deadline as deadlines
from ..client.writer import Writer
from ..conf import Config
from ..errors import MESSAGE_LIMIT, BookingFailed, DeadlineExceeded, caused_by_shutdown, error_class_name, error_message  # noqa: F401 - theirs now
from ..outcome import Outcome
from ..reporting import report
from . import death

logger = logging.getLogger("wurk_django.worker")

# Redis unreachable: the booking is left to the caller, who keeps the job un-ACKed.
TRANSIENT = (redis_lib.ConnectionError, redis_lib.TimeoutError)


def default_delay(count: int) -> int:
    return count**4 + 15


# -- the retry limit: the one rule ----------------------------------------------


def limit_of(job: dict, default: int, job_class: Any = None, exc: BaseException | None = None) -> int:
    """How many retries ``job`` may have after failing with ``exc``.

    A job class may decide per failure with a ``retry_limit(job, exc)`` class method
    (a Celery task's ``self.retry(max_retries=N)`` does): a number, ``True`` for the
    default, or ``None`` to leave it to the payload. Otherwise the payload's ``retry``
    when it is a number, else ``default`` (``WURK["MAX_RETRIES"]``).
    """
    hook = getattr(job_class, "retry_limit", None) if job_class is not None and exc is not None else None
    limit = hook(job, exc) if hook is not None else None
    if limit is None:
        limit = job.get("retry")
    return limit if isinstance(limit, int) and not isinstance(limit, bool) else default


def exhausted(job: dict, limit: int, now: float | None = None) -> bool:
    """Whether a failure of the run of ``job`` (the payload as fetched) ends it for good
    rather than booking a retry: retries are off, its ``retry_for`` window has passed
    since its first failure, this failure's retry count reaches ``limit``, or its
    ``deadline`` has passed. (A job's ``retry_in`` hook may still end it sooner:
    ``"kill"`` or ``"discard"``; a retry due after the deadline ends it too.)"""
    if not payload.truthy(job.get("retry")):
        return True
    now = time.time() if now is None else now
    deadline = job.get("deadline")
    if deadline is not None and deadlines.passed(deadline, now):
        return True
    retry_for = job.get("retry_for")
    if retry_for is not None:
        first_failed = payload.epoch_seconds(job.get("failed_at")) or now
        return first_failed + float(retry_for) < now
    # The first failure is booked with retry_count 0, each later one adds one.
    count = int(job.get("retry_count") or 0) + 1 if "retry_count" in job else 0
    return count >= limit


class Retrier:
    def __init__(self, config: Config) -> None:
        self.config = config
        self._rng = random.Random()

    # -- booking a failure ---------------------------------------------------

    def book(self, job_class: Any, raw: bytes, queue: str, exc: BaseException) -> Outcome:
        """Book ``exc``, the failure of the job fetched as ``raw``: ``RETRIED``, ``DEAD``
        or ``DISCARDED`` (``INTERRUPTED`` when a shutdown caused it, CORE-121).

        With the class known (``job_class``), its options and hooks apply; without
        one (an unknown class, a failure before the class was resolved), the payload
        alone decides. Raises :class:`BookingFailed` when booking for a known class
        fails for this payload, the internal error itself on the payload-only path,
        and Redis errors as they are, so the caller can keep the job.
        """
        if caused_by_shutdown(exc):
            return Outcome.INTERRUPTED
        msg = payload.loads(raw)
        if job_class is not None:
            retry = msg["retry"] if "retry" in msg else job_class.get_options().get(
                "retry", self.config.default_job_options.get("retry"))
            if payload.truthy(retry):
                msg["retry"] = retry
                try:
                    return self._attempt(job_class, msg, queue, exc)
                except TRANSIENT:
                    raise
                except Exception as internal:
                    raise BookingFailed(exc, internal) from internal
            # Retries off for this job: decided from the payload alone, which runs the
            # death handlers (CORE-120, CORE-125).
        return self._book_from_payload(msg, queue, exc)

    def _book_from_payload(self, msg: dict, queue: str, exc: BaseException) -> Outcome:
        if payload.truthy(msg.get("retry")):
            return self._attempt(None, msg, queue, exc)
        if "retry" not in msg:
            # No class to ask and no retry key (an unknown class pushed by hand, say):
            # nobody chose to drop it, so it is kept in the dead set with the error.
            msg.update({"queue": msg.get("queue") or queue, "error_message": error_message(exc),
                        "error_class": error_class_name(exc), "failed_at": self.config.wire_format.now()})
            logger.error("%s jid=%s cannot run (%s: %s) and has no retry key: moved to the dead set",
                         msg.get("class"), msg.get("jid"), msg["error_class"], msg["error_message"])
            death.die(msg, exc, reason=death.INVALID, config=self.config)
            return Outcome.DEAD
        return self._died(None, msg, exc, death.NO_RETRY)

    # -- booking ----------------------------------------------------------

    def _attempt(self, job_class: Any, msg: dict, queue: str, exc: BaseException) -> Outcome:
        now = time.time()
        ends = exhausted(msg, limit_of(msg, self.config.max_retries, job_class, exc), now)
        msg["queue"] = msg.get("retry_queue") or queue
        msg["error_message"] = error_message(exc)
        msg["error_class"] = error_class_name(exc)
        if "retry_count" in msg:
            msg["retried_at"] = self.config.wire_format.at(now)
            msg["retry_count"] = int(msg["retry_count"] or 0) + 1
        else:
            msg["failed_at"] = self.config.wire_format.at(now)
            msg["retry_count"] = 0
        count = msg["retry_count"]
        self._add_backtrace(msg, exc)

        deadline = msg.get("deadline")
        if ends:
            if deadline is not None and deadlines.passed(deadline, now):
                return self._past_deadline(job_class, msg, exc, now)
            return self._exhausted(job_class, msg, exc)

        delay = self._delay(job_class, count, exc, msg)
        if delay == "discard":
            msg["discarded_at"] = self.config.wire_format.now()
            return self._died(job_class, msg, exc, death.DISCARDED)
        if delay == "kill":
            return self._exhausted(job_class, msg, exc)
        retry_at = now + delay + self._spread(job_class, count)
        if deadline is not None and deadlines.passed(deadline, retry_at):
            return self._past_deadline(job_class, msg, exc, retry_at)
        Writer(self.config).add_to_set(keys.RETRY, [(msg, retry_at)])
        logger.debug("retry %s of %s jid=%s at %.0f", count, msg.get("class"), msg.get("jid"), retry_at)
        signals.send(signals.job_retried, job_class or msg.get("class"), job=msg, exception=exc, retry_at=retry_at)
        return Outcome.RETRIED

    def _spread(self, job_class: Any, count: int) -> float:
        """The random seconds added to a retry's delay so that many jobs failing together
        do not all come back in the same second (Sidekiq's rule: below 10 x (count + 1)).
        A job class whose ``retry_in`` already means an exact time (a Celery task's
        countdown; its own ``retry_jitter`` decides any randomness) sets
        ``retry_spread = False`` and gets none."""
        if job_class is not None and getattr(job_class, "retry_spread", True) is False:
            return 0.0
        return self._rng.randrange(10 * (count + 1))

    def _add_backtrace(self, msg: dict, exc: BaseException) -> None:
        option = msg.get("backtrace")
        if not payload.truthy(option):
            return
        lines = backtrace.lines_of(exc)
        if self.config.backtrace_cleaner is not None:
            lines = self.config.backtrace_cleaner(lines)
        if option is not True and isinstance(option, int):
            lines = lines[:option]
        msg["error_backtrace"] = backtrace.compress(lines)

    def _delay(self, job_class: Any, count: int, exc: BaseException, msg: dict) -> float | str:
        """Seconds until the next try, or ``"discard"``/``"kill"`` from the job's hook (CORE-123)."""
        hook = getattr(job_class, "retry_in", None) if job_class is not None else None
        if hook is None:
            return default_delay(count)
        try:
            result = hook(count, exc, msg)
        except Exception as hook_exc:
            report(hook_exc, {"context": "Failure scheduling retry using the defined `retry_in`", "job": msg},
                   self.config)
            return default_delay(count)
        if result in ("discard", "kill"):
            return result
        if isinstance(result, (int, float)) and not isinstance(result, bool) and result > 0:
            # Fractions are kept: a hook asking for 1.5 s (or Celery's "now", 0.001 s) gets it.
            return int(result) if isinstance(result, int) else float(result)
        return default_delay(count)

    def _past_deadline(self, job_class: Any, msg: dict, exc: BaseException, retry_at: float) -> Outcome:
        """The job's next try would come after its ``deadline``: it ends now, in the dead set
        (or discarded, with ``deadline_action="discard"``), its message saying why."""
        if not isinstance(exc, DeadlineExceeded):
            msg["error_message"] = (f"{msg['error_message']} (not retried: its retry at "
                                    f"{deadlines.shown(retry_at)} would be past its deadline "
                                    f"{deadlines.shown(float(msg['deadline']))})")
        return self._exhausted(job_class, msg, exc, death.DEADLINE)

    def _exhausted(self, job_class: Any, msg: dict, exc: BaseException, reason: str = death.EXHAUSTED) -> Outcome:
        """Retries are over: hook, then the morgue unless discarded, then death handlers (CORE-126)."""
        hook = getattr(job_class, "retries_exhausted", None) if job_class is not None else None
        outcome = None
        if hook is not None:
            try:
                outcome = hook(msg, exc)
            except Exception as hook_exc:
                report(hook_exc, {"context": "Error calling retries_exhausted", "job": msg}, self.config)
        if (msg.get("dead") is False or outcome == "discard"
                or (reason == death.DEADLINE and deadlines.discards(msg))):
            msg["discarded_at"] = self.config.wire_format.now()
            return self._died(job_class, msg, exc, death.DISCARDED)
        logger.info("adding dead %s job %s", msg.get("class"), msg.get("jid"))
        death.die(msg, exc, reason=reason, config=self.config, job_class=job_class)
        return Outcome.DEAD

    def _died(self, job_class: Any, msg: dict, exc: BaseException, reason: str) -> Outcome:
        death.die(msg, exc, reason=reason, config=self.config, job_class=job_class)
        return Outcome.DISCARDED
