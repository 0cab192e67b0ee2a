"""JSON exactly as Ruby's ``JSON.dump`` writes it, for digests Ruby and Python must agree on.

A loop id is a hash over JSON text, so a Ruby process and a Python process
registering the same loop must produce the same bytes: compact separators,
UTF-8 text (no ``\\uXXXX`` for non-ASCII), Ruby's escapes for control
characters, and Ruby's float spelling (``1.0e+20`` where Python says ``1e+20``,
and the exponent form from 1e15 up where Python waits until 1e16).
"""

from __future__ import annotations

import json
import math
from typing import Any


def ruby_json(value: Any) -> str:
    """``value`` (None, bool, int, float, str, list/tuple, dict with string keys) as Ruby's ``JSON.dump``."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return ruby_float(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(ruby_json(item) for item in value) + "]"
    if isinstance(value, dict):
        parts = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"JSON object keys must be strings, not {key!r}")
            parts.append(json.dumps(key, ensure_ascii=False) + ":" + ruby_json(item))
        return "{" + ",".join(parts) + "}"
    raise ValueError(f"{value!r} ({type(value).__name__}) cannot be written as JSON")


def ruby_float(value: float) -> str:
    """Ruby's ``Float#to_s`` for finite floats: shortest round-trip digits, always a ``.``,
    exponent form below 1e-4 and from 1e15 up."""
    if math.isnan(value) or math.isinf(value):
        raise ValueError(f"{value!r} cannot be written as JSON")
    text = repr(value)
    if "e" in text:
        mantissa, _, exponent = text.partition("e")
        if "." not in mantissa:
            mantissa += ".0"
        return f"{mantissa}e{exponent}"
    sign = "-" if text.startswith("-") else ""
    whole, _, fraction = text.lstrip("-").partition(".")
    if len(whole) <= 15 or whole.startswith("0"):
        return text
    digits = (whole + fraction).rstrip("0") or "0"
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return f"{sign}{mantissa}e+{len(whole) - 1:02d}"
