"""What workflows raise."""

from __future__ import annotations

from ..errors import WurkError


class InvalidWorkflow(ValueError):
    """A workflow that cannot be built: a cycle, an unknown dependency, a bad step name.
    Raised before anything is written to Redis."""


class NoSuchWorkflow(WurkError):
    """No workflow with this id (never created, expired, or deleted)."""


class StepResultError(WurkError):
    """A step's return value cannot be kept for the steps after it (too large, or not JSON).
    The step's run fails with it, like any exception of the job."""


class CannotRetry(WurkError):
    """A step cannot be retried (not failed, or its job is not in the dead set)."""
