"""The exceptions Celery code catches and raises, under the names it already uses."""

from __future__ import annotations

import builtins
from typing import Any

from ..errors import HardTimeLimitExceeded as TimeLimitExceeded  # noqa: F401 - Celery's name for it
from ..errors import (
    JobRevoked,  # noqa: F401 - what a revoked run raises
    SoftTimeLimitExceeded,  # noqa: F401 - Celery's name, wurk's class
)


class Retry(Exception):  # noqa: N818 - Celery's name, which task code already raises
    """Raised by ``self.retry()``: this run ends and the job is booked for another attempt.

    The worker books it through the normal retry layer (the ``retry`` set, visible in the
    admin), after ``countdown`` seconds (or at ``eta``), within the scheduler's poll.
    """

    def __init__(self, message: str | None = None, exc: BaseException | None = None,
                 when: float | None = None, max_retries: int | None = None) -> None:
        self.exc = exc
        #: Seconds from now until the next attempt (``None``: the task's ``default_retry_delay``).
        self.when = when
        #: The retry limit this call asked for (``None``: the task's ``max_retries``).
        self.max_retries = max_retries
        if message is None:
            wait = "" if when is None else f" in {when:g}s"
            message = f"Retry{wait}" + (f": {exc!r}" if exc is not None else "")
        super().__init__(message)


class MaxRetriesExceededError(Exception):
    """``self.retry()`` was called with the retries used up and no ``exc`` to re-raise."""


class TaskRevokedError(Exception):
    """The task will never run: its ``expires`` passed before a worker took it (or it was revoked)."""


class TimeoutError(builtins.TimeoutError):  # noqa: A001 - Celery's name for a result wait that ran out
    """``AsyncResult.get(timeout=...)`` waited that long and the task had not finished."""


class TaskError(Exception):
    """A task's failure whose exception class cannot be rebuilt in this process (a module
    this process may not import, or a constructor that refuses the stored arguments).

    ``exception_class_path``, ``message`` and ``traceback`` describe the original error.
    """

    def __init__(self, exception_class_path: str, message: str, traceback: str = "") -> None:
        self.exception_class_path = exception_class_path
        self.message = message
        self.traceback = traceback
        super().__init__(f"{exception_class_path}: {message}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.exception_class_path, self.message, self.traceback))


# -- the rest of Celery 5's ``celery.exceptions``, for the code that imports them ----------
#
# The time limits are wurk's own exceptions (the worker raises them); the others are
# plain classes with Celery's names and bases. Raised by a task, each fails it like
# any exception (``Ignore`` and ``Reject`` have no special meaning on wurk).


class CeleryError(Exception):
    """Celery's base class of its errors."""


class ImproperlyConfigured(CeleryError, ValueError):
    pass


class SecurityError(CeleryError):
    pass


class OperationalError(Exception):
    pass


class Ignore(Exception):  # noqa: N818 - Celery's name
    """Celery's "ignore this task": on wurk the run ends as a failure like any exception."""


class Reject(Exception):  # noqa: N818 - Celery's name
    """Celery's "reject this message": on wurk the run ends as a failure like any exception."""

    def __init__(self, reason: Any = None, requeue: bool = False) -> None:
        self.reason, self.requeue = reason, requeue
        super().__init__(reason, requeue)


class InvalidTaskError(CeleryError):
    pass


class ChordError(CeleryError):
    pass


class QueueNotFound(KeyError):
    pass


class IncompleteStream(CeleryError):
    pass


class NotRegistered(KeyError, CeleryError):
    pass


class AlreadyRegistered(CeleryError):
    pass


class WorkerLostError(Exception):
    pass


class WorkerShutdown(SystemExit):
    pass


class WorkerTerminate(SystemExit):
    pass


class BackendError(Exception):
    pass


class BackendGetMetaError(BackendError):
    pass


class BackendStoreError(BackendError):
    pass


class CeleryWarning(UserWarning):
    pass


class AlwaysEagerIgnored(CeleryWarning):
    pass


class DuplicateNodenameWarning(CeleryWarning):
    pass


class FixupWarning(CeleryWarning):
    pass


class NotConfigured(CeleryWarning):
    pass


class SecurityWarning(CeleryWarning):
    pass


class CDeprecationWarning(DeprecationWarning):
    pass


class CPendingDeprecationWarning(PendingDeprecationWarning):
    pass


#: Celery's alias of its TaskError base; here TaskError is the rebuilt-failure class above.
TaskPredicate = CeleryError
