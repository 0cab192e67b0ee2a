"""The job payload on the wire: JSON encoding, jids, timestamps and Ruby truthiness.

Every byte written to Redis goes through :func:`dumps` so that Ruby Sidekiq and
wurk_django produce the same compact JSON (CORE-003). Timestamps are written as
integer epoch milliseconds (Sidekiq 8) and read in either unit (CORE-040).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import orjson

__all__ = [
    "dumps",
    "loads",
    "new_jid",
    "now_ms",
    "epoch_seconds",
    "truthy",
    "score",
]


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON, the same bytes Ruby's ``JSON.generate`` writes (CORE-003)."""
    return orjson.dumps(obj)


def loads(raw: bytes | str) -> Any:
    return orjson.loads(raw)


def new_jid() -> str:
    """24 lowercase hex characters from 12 random bytes (CORE-013)."""
    return secrets.token_hex(12)


def now_ms() -> int:
    return int(time.time() * 1000)


def epoch_seconds(value: Any) -> float | None:
    """Read a payload timestamp: a JSON float is epoch seconds (Sidekiq <= 7),
    an integer is epoch milliseconds (Sidekiq >= 8) (CORE-040)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float):
        return value
    if isinstance(value, int):
        return value / 1000.0
    return None


def truthy(value: Any) -> bool:
    """Ruby truthiness: only ``nil`` and ``false`` are false (CORE-005)."""
    return value is not None and value is not False


def score(seconds: float) -> str:
    """A sorted-set score as Ruby would print it: shortest round-trip float (CORE-006)."""
    return repr(float(seconds))
