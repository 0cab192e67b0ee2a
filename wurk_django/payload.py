"""The job payload on the wire: JSON encoding, jids, timestamps and Ruby truthiness.

Every byte written to Redis goes through :func:`dumps` so that Ruby Sidekiq and
wurk_django produce the same compact JSON (CORE-003). Timestamps are written as
integer epoch milliseconds (Sidekiq 8), or float epoch seconds for Sidekiq <= 7
readers (:class:`WireFormat`), and read in either unit (CORE-040).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

import orjson

from .errors import InvalidJob

__all__ = [
    "dumps",
    "loads",
    "parse_job",
    "MAX_DEPTH",
    "new_jid",
    "now_ms",
    "WireFormat",
    "epoch_seconds",
    "truthy",
    "score",
]


def dumps(obj: Any) -> bytes:
    """Compact UTF-8 JSON, the bytes Ruby's ``JSON.generate`` writes for ordinary payloads (CORE-003).

    Floats Ruby writes in exponent form are the one residual difference (``1e+20`` here,
    ``1.0e+20`` in Ruby), which the spec accepts for payloads. Text that must equal Ruby's
    byte for byte (digests, batch callback entries, encrypted plaintext) goes through
    :func:`wurk_django.canonical.dumps` instead.
    """
    return orjson.dumps(obj)


def loads(raw: bytes | str) -> Any:
    return orjson.loads(raw)


# Ruby's JSON parser refuses documents nested deeper than 100 levels by default,
# so no Sidekiq client can produce one; our encoder gives up at 254. A payload
# past this limit is refused when it is read, before it can run or be re-booked.
MAX_DEPTH = 100

_INT = int


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """True when ``value`` nests lists/dicts more than ``limit`` levels (the top level is 1)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _depth_possible(raw: bytes | str, limit: int) -> bool:
    # Counting brackets is cheap C code; a payload with fewer brackets than the
    # limit cannot be nested past it, which spares the walk for ordinary jobs.
    if isinstance(raw, str):
        return raw.count("[") + raw.count("{") > limit
    return raw.count(b"[") + raw.count(b"{") > limit


def _is_int(value: Any) -> bool:
    return isinstance(value, _INT) and not isinstance(value, bool)


def parse_job(raw: bytes | str) -> dict:
    """Read a fetched payload, or raise :class:`InvalidJob` saying what is wrong with it.

    The rules are the ones every later step relies on: an object with a
    non-empty string ``class`` and a list ``args``; a string ``jid``; a string
    ``queue``; ``retry`` true/false/an integer; an integer ``retry_count``;
    numbers for ``retry_for``; no nesting past :data:`MAX_DEPTH`.
    """
    try:
        job = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidJob(f"Invalid JSON for job: {exc}") from None
    if _depth_possible(raw, MAX_DEPTH) and too_deep(job):
        raise InvalidJob(f"payload is nested deeper than {MAX_DEPTH} levels")
    if not isinstance(job, dict):
        raise InvalidJob(f"payload is JSON but not an object: {raw[:200]!r}")
    klass = job.get("class")
    if not isinstance(klass, str) or not klass or not isinstance(job.get("args"), list):
        raise InvalidJob("payload lacks a string 'class' or a list 'args'")
    problem = field_problem(job)
    if problem:
        raise InvalidJob(problem)
    return job


def field_problem(job: dict) -> str | None:
    """What is wrong with a job's typed fields (the client refuses, the worker dead-sets), or ``None``."""
    if "jid" in job and (not isinstance(job["jid"], str) or not job["jid"]):
        return f"payload 'jid' must be a non-empty string, not {job['jid']!r:.100}"
    for key in ("queue", "wrapped", "bid", "retry_queue"):
        if job.get(key) is not None and not isinstance(job[key], str):
            return f"payload {key!r} must be a string, not {job[key]!r:.100}"
    if "kwargs" in job and not isinstance(job["kwargs"], dict):
        # Keyword arguments are one JSON object of parameter names (the project's wire contract).
        return f"payload 'kwargs' must be an object of keyword arguments, not {job['kwargs']!r:.100}"
    retry = job.get("retry")
    if retry is not None and not isinstance(retry, bool) and not (_is_int(retry) and retry >= 0):
        return f"payload 'retry' must be true, false or an integer >= 0, not {retry!r:.100}"
    # -1 is legitimate: retrying a first failure by hand sets it there, as Sidekiq does.
    if "retry_count" in job and job["retry_count"] is not None and not _is_int(job["retry_count"]):
        return f"payload 'retry_count' must be an integer, not {job['retry_count']!r:.100}"
    retry_for = job.get("retry_for")
    if retry_for is not None and (isinstance(retry_for, bool) or not isinstance(retry_for, (int, float))):
        return f"payload 'retry_for' must be a number of seconds, not {retry_for!r:.100}"
    return None


def new_jid() -> str:
    """24 lowercase hex characters from 12 random bytes (CORE-013)."""
    return secrets.token_hex(12)


def now_ms() -> int:
    return int(time.time() * 1000)


class WireFormat:
    """Which Sidekiq generation's readers the timestamps we write are for (``WURK["WIRE_FORMAT"]``).

    Sidekiq 8 reads and writes integer epoch milliseconds; Sidekiq 6 and 7 read
    every payload timestamp (``created_at``, ``enqueued_at``, ``failed_at``,
    ``retried_at``) as float epoch seconds, and a millisecond value there is a
    date in the year 58886 and a latency of minus 1.79e12 seconds. Reading
    accepts both units whatever this says (:func:`epoch_seconds`).
    """

    __slots__ = ("version", "float_seconds")

    def __init__(self, version: int) -> None:
        self.version = version
        #: Timestamps as Ruby's ``Time.now.to_f`` (Sidekiq <= 7), not integer milliseconds.
        self.float_seconds = version < 8

    def now(self) -> int | float:
        """Now, as a payload timestamp in this format."""
        return time.time() if self.float_seconds else now_ms()

    def at(self, seconds: float) -> int | float:
        """``seconds`` (epoch) as a payload timestamp in this format."""
        return float(seconds) if self.float_seconds else int(seconds * 1000)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WireFormat) and other.version == self.version

    def __hash__(self) -> int:
        return hash(self.version)

    def __repr__(self) -> str:
        return f"WireFormat({self.version})"


#: The default: what Sidekiq 8 writes.
SIDEKIQ8 = WireFormat(8)


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
