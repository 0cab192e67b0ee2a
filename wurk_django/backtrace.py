"""Error backtraces as stored in job payloads: base64(zlib(JSON list of lines)) (CORE-027)."""

from __future__ import annotations

import base64
import binascii
import traceback
import zlib
from typing import Any

from . import payload


def lines_of(exc: BaseException) -> list[str]:
    """Frames innermost first, as Ruby orders a backtrace, in ``path:lineno:in 'func'`` form."""
    frames = traceback.extract_tb(exc.__traceback__)
    return [f"{f.filename}:{f.lineno}:in '{f.name}'" for f in reversed(frames)]


def compress(lines: list[str]) -> str:
    return base64.b64encode(zlib.compress(payload.dumps(lines))).decode("ascii")


def decompress(value: Any) -> list[str] | None:
    """Lenient reader: anything corrupt gives ``None`` rather than an error."""
    if not isinstance(value, (str, bytes)):
        return None
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4))
        lines = payload.loads(zlib.decompress(raw))
    except (binascii.Error, zlib.error, ValueError, TypeError):
        return None
    return lines if isinstance(lines, list) else None
