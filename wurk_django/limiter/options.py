"""Checking a limiter's construction arguments, and writing its options as Ruby does.

Every check runs in the constructor, so a typo surfaces when the module that
defines the limiter is imported, not at the first rate-limited call. Each
failure is a ``ValueError`` that names the argument and the value given.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

from .. import canonical

#: Interval names and their length in seconds.
UNITS: dict[str, int] = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}
#: Names Ruby wurk accepts (ASCII word characters plus ``-:.#@``), so per-tenant
#: names such as ``stripe-42`` or ``erp:acme`` work and nothing else slips in.
NAME = re.compile(r"[\w\-:.#@]+", re.ASCII)
DEFAULT_TTL = 90 * 24 * 3600
#: Shorter metadata lifetimes risk losing a limiter's record while jobs still use it.
MIN_TTL = 24 * 3600
DEFAULT_WAIT_TIMEOUT = 5
DEFAULT_LOCK_TIMEOUT = 30
#: How many times the server middleware reschedules a rate-limited job.
DEFAULT_RESCHEDULE = 20
POLICIES = ("raise", "ignore", "skip")


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def name(value: Any) -> str:
    if not isinstance(value, str) or not NAME.fullmatch(value):
        raise ValueError(f"limiter name must be letters, digits and _-:.#@ only, not {value!r}")
    return value


def positive_int(what: str, value: Any) -> int:
    if not _integer(value) or value < 1:
        raise ValueError(f"limiter {what} must be an integer >= 1, not {value!r}")
    return value


def positive_number(what: str, value: Any) -> int | float:
    if not _number(value) or value <= 0:
        raise ValueError(f"limiter {what} must be a number > 0, not {value!r}")
    return value


def non_negative_number(what: str, value: Any) -> int | float:
    if not _number(value) or value < 0:
        raise ValueError(f"limiter {what} must be a number >= 0, not {value!r}")
    return value


def interval(what: str, value: Any, *, allow_seconds: bool) -> str | int:
    """A unit name; with ``allow_seconds``, also a positive whole number of seconds."""
    if isinstance(value, str) and value in UNITS:
        return value
    if allow_seconds and _integer(value) and value > 0:
        return value
    units = ", ".join(repr(u) for u in UNITS)
    more = " or a whole number of seconds > 0" if allow_seconds else " (a period that starts at the top of the unit)"
    raise ValueError(f"limiter {what} must be one of {units}{more}, not {value!r}")


def seconds(value: str | int) -> int:
    return UNITS[value] if isinstance(value, str) else value


def ttl(value: Any) -> int:
    if not _integer(value) or value < MIN_TTL:
        raise ValueError(f"limiter ttl must be an integer number of seconds >= {MIN_TTL} (one day), not {value!r}")
    return value


def policy(value: Any) -> str:
    if value not in POLICIES:
        raise ValueError(f"limiter policy must be one of {', '.join(map(repr, POLICIES))}, not {value!r}")
    return value


def backoff(value: Any) -> Callable | None:
    if value is not None and not callable(value):
        raise ValueError(f"limiter backoff must be None or a callable (limiter, job, exc) -> seconds, not {value!r}")
    return value


def reschedule(value: Any) -> int | None:
    if value is not None and (not _integer(value) or value < 0):
        raise ValueError(f"limiter reschedule must be None or an integer >= 0, not {value!r}")
    return value


def to_json(options: dict[str, Any]) -> str:
    """The options as Ruby's ``JSON.dump`` writes them: compact, in insertion order,
    a callable as ``"<proc>"``. Ruby and Python must produce the same bytes, since
    the fingerprint is a digest of this text (ENT-004)."""
    return canonical.dumps({key: "<proc>" if callable(value) else value for key, value in options.items()})
