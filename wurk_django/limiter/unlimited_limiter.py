"""The limiter that never limits: a drop-in for tests and for plans without a quota."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from .base import Held


class _Open:
    __slots__ = ("held",)

    def __init__(self, held: Held) -> None:
        self.held = held

    def __enter__(self) -> Held:
        return self.held

    def __exit__(self, *exc: Any) -> None:
        return None


class Unlimited:
    """Same surface as the other limiters; touches no Redis and always runs the call."""

    type = "unlimited"
    name = "unlimited"
    options: dict[str, Any] = {}
    fingerprint = hashlib.sha256(b"unlimited").hexdigest()
    size = 0

    def within_limit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` (``used=``/``estimate=`` are accepted and ignored)."""
        kwargs.pop("used", None)
        kwargs.pop("estimate", None)
        return fn(*args, **kwargs)

    def acquire(self, **_kwargs: Any) -> _Open:
        return _Open(Held(self, True))

    def status(self) -> dict[str, Any]:
        return {"used": 0, "limit": None, "reset_at": None, "available": True}

    def reset(self) -> None:
        return None

    def delete(self) -> None:
        return None
