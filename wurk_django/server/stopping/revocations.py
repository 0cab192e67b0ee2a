"""Revoked jids, as this worker process knows them (issue 27 item 4).

:func:`wurk_django.api.revoke.revoke` writes a short-lived marker per jid in the
``revoked`` sorted set (member: ``{"jid", "by", "at"}``, score: when the marker
lapses) and, for a job that may be running, sends ``REVOKE <json>`` through the
process's dashboard signal list. Each heartbeat reads the live markers into
:data:`jids`; a processor checks a job against it before running it only while
it is non-empty (one truthiness test per job otherwise), so a job revoked while
it was in flight between lists (moved by the scheduler, fetched ahead into a
private list) is recorded as revoked instead of run.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import orjson

# The format is the push side's too (api/revoke.py): it lives outside the engine.
from ...revocation import COMMAND, KEY, MARKER_TTL, marker  # noqa: F401
from ...text import to_text

logger = logging.getLogger("wurk_django.worker")

#: jid -> (by, at) of the markers alive at the last beat, plus revokes heard since.
jids: dict[str, tuple[str, float]] = {}


def load(members: list[Any]) -> None:
    """The heartbeat read the live markers: they replace what this process knew."""
    global jids
    found: dict[str, tuple[str, float]] = {}
    for member in members or ():
        parsed = _parse(member)
        if parsed is not None:
            found[parsed[0]] = parsed[1:]
    jids = found


def _parse(member: Any) -> tuple[str, str, float] | None:
    try:
        data = orjson.loads(member)
        return str(data["jid"]), str(data.get("by") or ""), float(data.get("at") or time.time())
    except Exception:  # a marker written by hand: ignore it rather than stop the beat
        logger.warning("ignoring an unreadable revoke marker %r", to_text(member))
        return None


def command(text: str, config: Any) -> None:
    """``REVOKE {"jid", "by", "at", "terminate"}`` from the signal list: remember the jid,
    and when asked to terminate, stop the job if one of this process's threads runs it."""
    try:
        data = orjson.loads(text[len(COMMAND):])
        jid, by, at = str(data["jid"]), str(data.get("by") or ""), float(data.get("at") or time.time())
    except Exception:
        logger.warning("ignoring an unreadable revoke command %r", text)
        return
    global jids
    jids = {**jids, jid: (by, at)}  # a new dict: processors read it without a lock
    if not data.get("terminate"):
        return
    from .watchdog import MANAGERS, WATCHDOG

    for manager in list(MANAGERS):
        for run in manager.runs():
            if run.jid == jid and WATCHDOG.stop(run, by, at, float(config.revoke_grace)):
                logger.warning("job %s revoked by %s: stopping it (soft now, hard after %ss)",
                               jid, by or "an unnamed caller", config.revoke_grace)
