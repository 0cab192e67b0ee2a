"""Waking this process's blocked reads when it stops.

An idle fetcher waits in Redis (``BLMOVE`` on its queue, ``BRPOP``, or ``BLPOP`` on
wake-up lists) for up to ``FETCH_POLL_INTERVAL`` seconds. A stop that waited for that
read to time out made every idle worker take up to two seconds to exit, for nothing:
no job can arrive that the stop would run. So the connections of the blocking pool
carry a name of their own (``CLIENT SETNAME``, sent by redis-py on connect), unique
to this process, and the stop asks Redis which of them are blocked (``CLIENT LIST``)
and ends each block (``CLIENT UNBLOCK``): the read returns as a timeout would, with
nothing, and the fetcher sees it is done.

Nothing is lost by ending a block early: Redis ends it only while the client is still
waiting, never after it handed the client a job. A fetch that starts its block just
after the stop looked waits it out, as every stop did before. A server that refuses
``CLIENT`` (some managed services rename or forbid it) leaves the stop as it was:
bounded by the poll interval. A name the settings give the connections themselves
(``OPTIONS``' ``client_name``) is kept, and then nothing is unblocked: a name shared
by several processes would wake their reads too.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
from typing import Any

import redis as redis_lib

logger = logging.getLogger(__name__)

_names: dict[int, str] = {}


def connection_name() -> str:
    """This process's name for its blocking connections (a forked child gets its own)."""
    pid = os.getpid()
    name = _names.get(pid)
    if name is None:
        name = _names.setdefault(pid, f"wurk-fetch-{pid}-{secrets.token_hex(4)}")
    return name


def name_option(configured: dict[str, Any]) -> dict[str, Any]:
    """The pool option naming the blocking connections, unless the settings name them."""
    if configured.get("client_name"):
        return {}
    return {"client_name": connection_name()}


def unblock(client: redis_lib.Redis) -> int:
    """End the blocks of this process's blocking connections; how many were ended.

    ``client`` is a client of the same server (not of the blocking pool, whose
    connections may all be blocked). Errors are logged at debug level and ignored:
    the stop then waits for the blocks to time out, as without this.
    """
    name = connection_name()
    try:
        ended = 0
        for entry in client.client_list(_type="normal"):
            if _text(entry.get("name")) == name and "b" in _text(entry.get("flags")):
                ended += int(bool(client.client_unblock(int(entry["id"]))))
        return ended
    except Exception as exc:  # best effort, in a thread of its own: a pool torn down meanwhile included
        logger.debug("could not end this process's blocked reads at stop (%s); they end on their timeout", exc)
        return 0


def unblock_soon(client: redis_lib.Redis) -> threading.Thread:
    """:func:`unblock` in a thread of its own: a stop never waits on Redis for it."""
    thread = threading.Thread(target=unblock, args=(client,), name="wurk-unblock", daemon=True)
    thread.start()
    return thread


def _text(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return "" if value is None else str(value)
