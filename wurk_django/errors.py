"""Exceptions raised by wurk_django, and the shutdown the worker injects into busy threads."""

from __future__ import annotations

import redis


class WurkError(Exception):
    """Base class of wurk_django's own errors."""


class ConfigurationError(WurkError):
    """``settings.WURK`` holds a value the worker cannot use."""


class UnknownJobClass(WurkError):
    """A payload names a job class that no registered job answers to (CORE-045).

    Raised inside the global retry scope, so the job retries and eventually
    reaches the dead set; it is never silently dropped.
    """


class InvalidJob(WurkError, ValueError):
    """A payload is missing ``class`` or ``args``, or holds values of the wrong type."""


class BookingFailed(WurkError):
    """Recording a job's failure raised (a hook, a cleaner, a payload that cannot be written back).

    Raised by the retry layer to the processor, which then puts the job in the dead
    set with both errors instead of running it again.
    """

    def __init__(self, job_error: BaseException, internal: BaseException) -> None:
        super().__init__(f"could not book the failure ({type(job_error).__name__}: {job_error}) "
                         f"because {type(internal).__name__}: {internal}")
        self.job_error = job_error
        self.internal = internal


class RedisVersionError(WurkError):
    """The Redis server cannot hold wurk's data: older than 7.0 (CORE-002), a Redis
    Cluster (:class:`RedisClusterError`), or one that may evict keys
    (:class:`RedisEvictionError`). Retrying cannot help."""


class RedisClusterError(RedisVersionError):
    """The Redis server is a Redis Cluster node, where the job engine (pushes, workers,
    the data API, the admin) is not supported yet (RUN-606; issue 46). The message
    names what was refused and the server."""


class RedisEvictionError(RedisVersionError):
    """The Redis server's ``maxmemory-policy`` may evict keys (any but ``noeviction``),
    and ``WURK["ALLOW_EVICTION"]`` is not True: a worker refuses to start (issue 43 item 3)."""


class RedisFull(WurkError, redis.OutOfMemoryError):
    """Redis refused a write because it is at its ``maxmemory`` limit (with
    ``noeviction``, or no key it may evict). The message names the limit. Still a
    redis-py ``OutOfMemoryError``, so code catching that keeps working."""


# How a job's run ends is a value (wurk_django.outcome), not an exception. Two
# BaseException subclasses remain, so a job's own ``except Exception`` cannot
# swallow them: ``Shutdown``, which the manager injects into a busy thread, and
# ``RetrySkip``, which nothing raises any more.


class RetrySkip(BaseException):  # noqa: N818 - Sidekiq's name
    """No longer raised: a feature that ends a run sets ``context.current().outcome``
    (see wurk_django.outcome). Kept so code that names it still imports."""


class Shutdown(BaseException):  # noqa: N818 - Sidekiq's name
    """Injected into a job thread at the hard-shutdown deadline; the job was requeued."""


class JobInterrupted(Exception):  # noqa: N818
    """Raised by a job that wants to be re-pushed and resume later (CORE-117)."""


class SoftTimeLimitExceeded(Exception):  # noqa: N818 - the name Celery code already catches
    """Raised inside a running job when its ``soft_time_limit`` passes, or when it is
    revoked while running (the soft stop). The job may catch it to clean up; if it
    escapes, the run is a failure like any other (retried per the job's policy).
    See docs/time-limits.md for where Python can and cannot deliver it."""


class HardTimeLimitExceeded(WurkError):
    """The error a job is booked with when its ``time_limit`` passed: its thread was
    abandoned and replaced, and the job retried or moved to the dead set. Never raised
    inside the job itself."""


class DeadlineExceeded(WurkError):
    """The error a job is booked with when its ``deadline`` passed: it was not started by
    then (the dead set, or discarded with ``deadline_action="discard"``), or it was still
    running (its thread abandoned and replaced, as at a hard time limit). Never raised
    inside the job itself."""


class JobRevoked(WurkError):
    """The error a revoked job is recorded with in the dead set (who stopped it, and when)."""


#: How much of an error's message a payload keeps (``error_message``).
MESSAGE_LIMIT = 10_000
_UNREADABLE = "!!! ERROR MESSAGE THREW AN ERROR !!!"


def error_class_name(exc: BaseException) -> str:
    """``module.QualName``, or the bare name for builtins (CORE-025)."""
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def error_message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # a broken __str__ must not stop the booking
        return _UNREADABLE
    return text.encode("utf-8", "replace").decode("utf-8")[:MESSAGE_LIMIT]


def caused_by_shutdown(exc: BaseException) -> bool:
    """True when ``Shutdown`` is anywhere in the cause chain (CORE-121), cycle-safe."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, Shutdown):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
