"""Revoked jids, as this worker process knows them (issue 27 item 4).

:func:`wurk_django.api.revoke.revoke` writes a short-lived marker per jid in the
``revoked`` sorted set (member: ``{"jid", "by", "at"}``, score: when the marker
lapses), publishes ``REVOKE <json>`` on the revoke channel in the same round trip
and, for a job that may be running, sends the same command through the process's
dashboard signal list. The process hears the channel at once
(:mod:`.revoke_channel`, on its one subscribed connection) and the signal list at
its next heartbeat (the fallback while the subscription is down): both end in
:func:`command`, which remembers the jid and, to terminate, hands the running job
to the watchdog; a second hearing of the same revoke changes nothing.

Each heartbeat reads the live markers into :data:`jids`, keeping what the channel
brought since the beat's read (the marker is written before the publish, so a
later beat finds it). A processor checks a job against :data:`jids` before running
it only while it is non-empty (one truthiness test per job otherwise), so a job
revoked while it was in flight between lists (moved by the scheduler, fetched
ahead into a private list) is recorded as revoked instead of run.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import orjson

# The format is the push side's too (api/revoke.py): it lives outside the engine.
from ...revocation import COMMAND, KEY, MARKER_TTL, marker  # noqa: F401
from ...text import to_text

logger = logging.getLogger("wurk_django.worker")

#: jid -> (by, at) of the markers alive at the last beat, plus revokes heard since.
jids: dict[str, tuple[str, float]] = {}
#: jid -> (by, at, when heard, monotonic) of revokes heard since the last beat's read began.
_heard: dict[str, tuple[str, float, float]] = {}
_lock = threading.Lock()


def load(members: list[Any], read_at: float | None = None) -> None:
    """The heartbeat read the live markers: they replace what this process knew, but for
    the revokes heard after ``read_at`` (``time.monotonic()`` as the beat's read was
    sent), whose markers that read may have missed."""
    global jids
    found: dict[str, tuple[str, float]] = {}
    for member in members or ():
        parsed = _parse(member)
        if parsed is not None:
            found[parsed[0]] = parsed[1:]
    with _lock:
        for jid, (by, at, heard_at) in list(_heard.items()):
            if read_at is not None and heard_at >= read_at:
                found.setdefault(jid, (by, at))
            else:
                del _heard[jid]  # the read came after it: its marker was there, or has lapsed
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
    with _lock:
        _heard[jid] = (by, at, time.monotonic())
        jids = {**jids, jid: (by, at)}  # a new dict: processors read it without a lock
    if not data.get("terminate"):
        return
    from .watchdog import MANAGERS, WATCHDOG

    for manager in list(MANAGERS):
        for run in manager.runs():
            if run.jid == jid and WATCHDOG.stop(run, by, at, float(config.revoke_grace)):
                logger.warning("job %s revoked by %s: stopping it (soft now, hard after %ss)",
                               jid, by or "an unnamed caller", config.revoke_grace)
