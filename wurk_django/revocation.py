"""What a revoke writes and a worker reads (issue 27 item 4): the marker, the command
and the error a revoked job is recorded with.

:func:`wurk_django.api.revoke.revoke` writes a short-lived marker per jid in the
``revoked`` sorted set and, in the same round trip, publishes the ``REVOKE``
command on the revoke channel, which every worker process hears at once on its
subscribed connection. For a job that may be running it also sends the command
through the processes' signal lists, which each process reads at its next
heartbeat: the fallback for a process whose subscription is down when the revoke
is published. The worker's side (:mod:`wurk_django.server.stopping.revocations`)
reads all three. Both sides take the format from here, so a process that only
revokes loads no worker engine.
"""

from __future__ import annotations

import datetime as dt

import orjson

from .errors import JobRevoked

KEY = "revoked"  # ZSET: member {"jid", "by", "at"} (JSON), score = when the marker lapses
#: Seconds a marker lives: long enough for a job in flight to land somewhere and be seen.
MARKER_TTL = 3600
COMMAND = "REVOKE "
#: Pub/sub channel a revoke publishes its command on (not a Sidekiq name; Ruby processes never subscribe).
CHANNEL = "wurk-revoke"


def channel(db: int | str) -> str:
    """``wurk-revoke:<db>``: channels are server-wide, the markers are per database."""
    return f"{CHANNEL}:{db}"


def marker(jid: str, by: str | None, at: float) -> bytes:
    return orjson.dumps({"jid": jid, "by": by or "", "at": at})


def command(jid: str, by: str | None, at: float, *, terminate: bool) -> str:
    """The signal-list entry asking a process to stop ``jid`` (``terminate``) or only to remember it."""
    return COMMAND + orjson.dumps({"jid": jid, "by": by or "", "at": at, "terminate": terminate}).decode()


def revoked_error(by: str | None, at: float) -> JobRevoked:
    """The error a revoked job is recorded with: who stopped it and when (UTC)."""
    when = dt.datetime.fromtimestamp(at, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    return JobRevoked(f"revoked by {by or 'an unnamed caller'} at {when}")
