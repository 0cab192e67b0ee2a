"""Redis replies as text: the one bytes-to-str conversion the package uses.

The package's clients answer with bytes (so job payloads stay exactly as
stored), while a client made with ``decode_responses=True`` answers with str;
code that reads names, ids and numbers from Redis accepts both through here.
"""

from __future__ import annotations

from typing import Any, overload

__all__ = ["to_text"]


@overload
def to_text(value: None) -> None: ...


@overload
def to_text(value: bytes | bytearray | memoryview | str | int | float) -> str: ...


def to_text(value: Any) -> str | None:
    """``value`` as str: bytes decoded as UTF-8, anything else through ``str()``;
    ``None`` (a missing key or field) stays ``None``.

    Bytes that are not valid UTF-8 decode with U+FFFD in place of the bad bytes:
    a stray value written by another tool must not crash the reader.
    """
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "replace")
    return str(value)
