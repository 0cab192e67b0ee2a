"""Jobs that cannot run or cannot be booked go to the dead set with the reason (CORE-110).

A payload may be unreadable (not JSON, nested too deep, a field of the wrong
type), or readable but impossible to write back (booking its failure raised).
Either way it must not be run again, and it must not vanish: it is stored in
the dead set, where a person can read why.

The entry keeps the job as it was when it can be written back unchanged;
otherwise the bytes received are kept, as text, as the entry's only argument,
under ``class`` ``"<unparseable>"``, so nothing of the original is lost.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

from .. import payload
from ..errors import InvalidJob
from . import death

logger = logging.getLogger("wurk_django.worker")

UNPARSEABLE = "<unparseable>"
ERROR_CLASS = f"{InvalidJob.__module__}.{InvalidJob.__qualname__}"


def raw_text(raw: bytes | str) -> str:
    """The received bytes as JSON-safe text: UTF-8 as is, anything else as ``base64:...``."""
    if isinstance(raw, str):
        return raw
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(raw).decode("ascii")


def entry_for(raw: bytes | str, reason: str, queue: str,
              wire: payload.WireFormat = payload.SIDEKIQ8) -> bytes:
    """The dead-set member for ``raw``: the job with error fields, or a wrapper around its text."""
    try:
        parsed = payload.loads(raw)
    except Exception:  # not JSON at all (or past the parser's own depth limit)
        parsed = None
    stamp = {"error_class": ERROR_CLASS, "error_message": reason[:10_000], "failed_at": wire.now()}
    if isinstance(parsed, dict) and not payload.too_deep(parsed):
        entry = {**parsed, "queue": parsed.get("queue") if isinstance(parsed.get("queue"), str) else queue}
        if not isinstance(entry.get("jid"), str) or not entry.get("jid"):
            # The dashboard addresses entries by a string jid; keep the bad one beside it.
            if "jid" in entry:
                entry["invalid_jid"] = entry["jid"]
            entry["jid"] = payload.new_jid()
        entry.update(stamp)
        try:
            return payload.dumps(entry)
        except Exception:  # e.g. an integer too large to write back: keep the text instead
            pass
    return payload.dumps({"class": UNPARSEABLE, "args": [raw_text(raw)], "queue": queue,
                          "jid": payload.new_jid(), **stamp})


def bury(raw: bytes | str, exc: BaseException, *, reason: str, queue: str, config: Any,
         redis: Any = None) -> None:
    """Store ``raw`` in the dead set with ``reason`` and run the death handlers (reason INVALID).

    Raises only when Redis itself fails, so the caller can leave the job where it is.
    """
    member = entry_for(raw, reason, queue, config.wire_format)
    logger.error("%s (queue %s): moved to the dead set", reason, queue)
    death.die(payload.loads(member), exc, reason=death.INVALID, config=config, redis=redis, raw=member)
