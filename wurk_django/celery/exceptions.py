"""The exceptions Celery code catches and raises, under the names it already uses."""

from __future__ import annotations

import builtins
from typing import Any


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
