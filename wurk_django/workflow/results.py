"""A step's return value, as it is kept in Redis for the steps after it."""

from __future__ import annotations

from typing import Any

from .. import payload
from .errors import StepResultError


def encode(value: Any, step: str, limit: int) -> bytes:
    """``value`` as JSON, or :class:`StepResultError` naming why it cannot be kept."""
    try:
        encoded = payload.dumps(value)
    except (TypeError, ValueError) as exc:
        raise StepResultError(f"workflow step {step!r} returned a {type(value).__name__}, which is not JSON "
                              f"({exc}); return str, int, float, bool, None, list or dict with str keys") from None
    if len(encoded) > limit:
        raise StepResultError(f"workflow step {step!r} returned {len(encoded)} bytes of JSON, more than "
                              f"WORKFLOW_RESULT_MAX_BYTES ({limit} bytes); store large data elsewhere and "
                              f"return a reference to it")
    return encoded


def decode(raw: bytes | str | None) -> Any:
    return None if raw is None else payload.loads(raw)
