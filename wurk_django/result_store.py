"""Job results in Redis: one hash per job at ``status:<jid>`` (DJ-018, DJ-019).

The storage layer shared by the ``django.tasks`` backend (:mod:`wurk_django.tasks`)
and the Celery-style tasks (:mod:`wurk_django.celery`); it imports nothing of
``django.tasks``, so it works on every supported Django. Fields are strings in
Redis; structures are JSON and timestamps epoch milliseconds:

``state``        ``enqueued``, ``scheduled``, ``running``, ``retrying``, ``interrupted``,
                 ``complete``, ``failed`` or ``dead``
``class``        what ran (a task's path or name)
``task``         the producer's metadata (the ``django.tasks`` backend's)
``args``/``kwargs``  what the task is called with (when the producer keeps them)
``enqueued_at``, ``started_at``, ``last_attempted_at``, ``finished_at``
``errors``       ``[{"exception_class_path", "traceback", ...}, ...]``, one per failed attempt
``worker_ids``   one entry per started attempt
``return_value`` only once ``state`` is ``complete``
``ttl``          seconds each write keeps the record for
"""

from __future__ import annotations

import re
from typing import Any

from . import keys, payload

DEFAULT_TTL = 86_400
JID = re.compile(r"^[0-9a-f]{24}$")

_JSON_FIELDS = ("task", "args", "kwargs", "errors", "worker_ids", "return_value")
_INT_FIELDS = ("enqueued_at", "started_at", "last_attempted_at", "finished_at", "ttl")


def key(jid: str) -> str:
    return keys.task_status(jid)


def valid_id(result_id: Any) -> bool:
    return isinstance(result_id, str) and bool(JID.match(result_id))


def encode(fields: dict[str, Any]) -> dict[str, bytes | str | int]:
    """Fields as written to the hash: JSON for structures, ints for timestamps."""
    out: dict[str, bytes | str | int] = {}
    for name, value in fields.items():
        if name in _JSON_FIELDS:
            out[name] = payload.dumps(value)
        elif value is None:
            continue
        else:
            out[name] = value
    return out


def decode(raw: dict[bytes | str, bytes | str]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, value in raw.items():
        name = name.decode() if isinstance(name, bytes) else name
        if name in _JSON_FIELDS:
            fields[name] = payload.loads(value)
        elif name in _INT_FIELDS:
            fields[name] = int(value)
        else:
            fields[name] = value.decode() if isinstance(value, bytes) else value
    return fields


def commands(jid: str, fields: dict[str, Any], ttl: int) -> list[tuple[Any, ...]]:
    """The HSET and EXPIRE that write ``fields``, for a caller's own round trip (a push)."""
    parts = [part for pair in encode(fields).items() for part in pair]
    return [("HSET", key(jid), *parts), ("EXPIRE", key(jid), ttl)] if parts else []


def write(redis: Any, jid: str, fields: dict[str, Any], ttl: int, *, drop: tuple[str, ...] = ()) -> None:
    """HSET the fields (and HDEL ``drop``), renewing the expiry, in one round trip."""
    pipe = redis.pipeline(transaction=True)
    if drop:
        pipe.hdel(key(jid), *drop)
    pipe.hset(key(jid), mapping=encode(fields))
    pipe.expire(key(jid), ttl)
    pipe.execute()


def read(redis: Any, jid: str) -> dict[str, Any] | None:
    raw = redis.hgetall(key(jid))
    return decode(raw) if raw else None
