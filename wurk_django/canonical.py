"""Canonical JSON: values encoded exactly as Ruby's ``JSON.dump`` encodes them (ENT-004).

Whatever is hashed into a Redis key that Ruby processes also compute (a unique
job's lock, a limiter's fingerprint, a cron entry's id) and whatever plaintext
is encrypted for Ruby processes to read must be the same bytes on both sides.
Python's ``json`` agrees with Ruby on everything but floats: Ruby spells
exponents ``1.0e+20`` where Python writes ``1e+20``, and switches to exponent
form for whole numbers from 1e15 up where Python waits until 1e16. Compact separators, no ASCII escaping (UTF-8 text as is),
control characters as ``\\n`` or ``\\u001f``, dict keys in insertion order.
"""

from __future__ import annotations

import hashlib
import json
import math
from decimal import Decimal
from typing import Any

__all__ = ["dumps", "sha256_hex"]

_encode_str = json.JSONEncoder(ensure_ascii=False).encode


def ruby_float(value: float) -> str:
    """A float as Ruby's ``Float#to_s`` prints it inside JSON."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(value)  # the shortest digits that read back to the same float, as Ruby picks them
    if value == 0:
        return text
    sign, digits, exponent = Decimal(text).as_tuple()
    shown = "".join(map(str, digits)).rstrip("0")
    point = len(digits) + exponent  # the value is 0.<digits> x 10**point
    if -4 < point <= 15 or 0 < point < len(shown):
        # Ruby writes these positionally, as Python's repr does. Repr also does so for a
        # whole number of 16 digits, which Ruby writes with an exponent (1.0e+15).
        return text
    mantissa = shown[0] + "." + (shown[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}e{point - 1:+03d}"


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return ""  # Ruby: nil.to_s
    if isinstance(key, float):
        return ruby_float(key)
    return str(key)


def _encode(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(_encode_str(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(int.__repr__(value))
    elif isinstance(value, float):
        out.append(ruby_float(value))
    elif isinstance(value, dict):
        out.append("{")
        first = True
        for key, item in value.items():
            if not first:
                out.append(",")
            first = False
            out.append(_encode_str(_key(key)))
            out.append(":")
            _encode(item, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out)
        out.append("]")
    else:
        raise TypeError(f"canonical JSON cannot encode a {type(value).__name__}")


def dumps(value: Any) -> str:
    """The text Ruby's ``JSON.dump(value)`` produces for the same value."""
    out: list[str] = []
    _encode(value, out)
    return "".join(out)


def sha256_hex(value: Any) -> str:
    """SHA-256 (hex) of the UTF-8 bytes of :func:`dumps` of ``value``."""
    return hashlib.sha256(dumps(value).encode("utf-8")).hexdigest()
