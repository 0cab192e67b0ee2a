"""Canonical JSON: values encoded exactly as Ruby 3.1's ``JSON.dump`` encodes them (ENT-004).

Whatever is hashed into a Redis key that Ruby processes also compute (a unique
job's lock, a limiter's fingerprint, a periodic loop's id) and whatever plaintext
is encrypted for Ruby processes to read must be the same bytes on both sides, so
this is the one encoder for all of them.

What Ruby's json gem (2.6, shipped with Ruby 3.1) writes, and this module with it:

- compact separators, dict keys in insertion order (callers sort when a digest says so);
- strings as UTF-8 text: non-ASCII, ``/``, DEL and U+2028/U+2029 stay as they are;
  ``"`` and ``\\`` are escaped, control characters below U+0020 become
  ``\\b \\f \\n \\r \\t`` or ``\\u00XX`` (lowercase hex);
- floats as Ruby's ``Float#to_s``: the shortest digits that read back to the same
  float, always with a ``.``; exponent form (``1.0e+16``, ``1.0e-05``, two-digit
  exponent at least) below 1e-4 and from 1e16 up, and also for whole numbers from
  1e15 up (``1.0e+15``, where ``1000000000000000.5`` stays positional);
  ``NaN``/``Infinity``/``-Infinity`` as bare words, since ``JSON.dump`` allows them
  (``allow_nan=False`` refuses them, as ``to_json`` does);
- integers of any size in decimal;
- dict keys that are not strings as Ruby's ``to_s`` spells them: ``1`` -> ``"1"``,
  ``None`` -> ``""``, ``True`` -> ``"true"``, a float as above.
"""

from __future__ import annotations

import hashlib
import json
import math
from decimal import Decimal
from typing import Any

__all__ = ["dumps", "ruby_float", "sha256_hex"]

# Python's own string encoder escapes exactly the characters Ruby's does, the same way.
_encode_str = json.JSONEncoder(ensure_ascii=False).encode


def ruby_float(value: float) -> str:
    """A float as Ruby's ``Float#to_s`` prints it (and so as ``JSON.dump`` writes it)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    text = repr(value)  # the shortest digits that read back to the same float, as Ruby picks them
    if value == 0:
        return text  # "0.0" or "-0.0"
    sign, digits, exponent = Decimal(text).as_tuple()
    shown = "".join(map(str, digits)).rstrip("0")
    point = len(digits) + exponent  # the value is 0.<shown> x 10**point
    if -4 < point <= 15 or 0 < point < len(shown):
        # Positional, as Python's repr writes it too. Repr is also positional for a
        # whole number of 16 digits, which Ruby writes with an exponent (1.0e+15).
        return text
    mantissa = shown[0] + "." + (shown[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}e{point - 1:+03d}"


def _int(value: int) -> str:
    try:
        return int.__repr__(value)
    except ValueError:
        # Past Python's digit limit for int -> str (4300 digits by default); Ruby prints
        # any Integer, and Decimal converts without that limit.
        return str(Decimal(int(value)))


def _key(key: Any) -> str:
    if isinstance(key, str):
        return key
    if isinstance(key, bool):
        return "true" if key else "false"
    if key is None:
        return ""  # Ruby: nil.to_s
    if isinstance(key, int):
        return _int(key)
    if isinstance(key, float):
        return ruby_float(key)
    raise TypeError(f"canonical JSON cannot use a {type(key).__name__} as an object key")


def _encode(value: Any, out: list[str], allow_nan: bool) -> None:
    if isinstance(value, str):
        out.append(_encode_str(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(_int(value))
    elif isinstance(value, float):
        if not allow_nan and not math.isfinite(value):
            raise ValueError(f"{value!r} is not allowed in JSON")
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
            _encode(item, out, allow_nan)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, item in enumerate(value):
            if i:
                out.append(",")
            _encode(item, out, allow_nan)
        out.append("]")
    else:
        raise TypeError(f"canonical JSON cannot encode a {type(value).__name__}")


def dumps(value: Any, *, allow_nan: bool = True) -> str:
    """The text Ruby's ``JSON.dump(value)`` produces for the same value.

    ``value`` is built from ``None``, bools, ints, floats, strings, lists/tuples and
    dicts; anything else is a ``TypeError``. With ``allow_nan=False`` a NaN or an
    infinity is a ``ValueError`` (Ruby's ``to_json`` refuses them, ``JSON.dump`` does not).
    """
    out: list[str] = []
    _encode(value, out, allow_nan)
    return "".join(out)


def sha256_hex(value: Any) -> str:
    """SHA-256 (hex) of the UTF-8 bytes of :func:`dumps` of ``value``: a unique job's digest (ENT-203)."""
    return hashlib.sha256(dumps(value).encode("utf-8")).hexdigest()
