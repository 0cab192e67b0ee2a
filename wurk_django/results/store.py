"""Where result records live: one hash per job at ``status:<id>`` in Redis (DJ-018, DJ-019),
or this process's memory for a run that never reached Redis (``apply()``, the testing modes).

This module only stores and reads; what goes in a record, and when, is decided by
:mod:`.record`, the one writer. It imports nothing of ``django.tasks`` or the worker,
so it works in every process on every supported Django. Fields are strings in Redis;
structures are JSON and timestamps epoch milliseconds:

``state``        one of :class:`~.states.State` (``enqueued``, ``scheduled``, ``running``,
                 ``retrying``, ``interrupted``, ``complete``, ``failed``, ``revoked``)
``class``        what ran (a task's path or name)
``task``         the producer's metadata (the ``django.tasks`` backend's)
``args``/``kwargs``  what the task is called with (when the producer keeps them)
``enqueued_at``, ``started_at``, ``last_attempted_at``, ``finished_at``
``errors``       ``[{"exception_class_path", "traceback", "message", "args"?}, ...]``, one per failed attempt
``worker_ids``   one entry per started attempt
``return_value`` only once ``state`` is ``complete``
``custom_state``/``meta``  a Celery task's ``update_state`` while it runs
``ttl``          seconds each write keeps the record for
``progress``, ``message``, ``progress_at``  how far a running job says it is (0 to 100), what it
                 does now, and when it said so (``Job.progress``, ``wurk_django.status.progress``);
                 a debounced job a later push replaced: ``revoked`` with ``message`` naming
                 that push's jid, written by ``policies/lua/debounce.lua`` (the one writer
                 outside :mod:`.record`, since only that step knows which job it replaced)
``reason``       why a job that died ended (``wurk_django.death``'s reason: ``exhausted``,
                 ``deadline``, ``manual``, ...), written by the death path
``result_note``  why a tracked job's ``return_value`` was not kept (not JSON, or too large)
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from typing import Any

from .. import keys, payload
from ..redis.cluster_layout import layout_of

DEFAULT_TTL = 86_400
#: The ids a record may have: wurk's own jids (24 hex digits), Celery's UUIDs, and any
#: name a caller picks within these characters. The id is part of a Redis key and of the
#: admin's URLs, so nothing else is accepted.
ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$")
ID_RULE = "1 to 128 characters: letters, digits, '_', '.', ':' or '-', starting with a letter or digit"
#: The keys of every record, for a scan (the admin's Tasks page).
PATTERN = "status:*"
PREFIX = "status:"

_JSON_FIELDS = ("task", "args", "kwargs", "errors", "worker_ids", "return_value")
_INT_FIELDS = ("enqueued_at", "started_at", "last_attempted_at", "finished_at", "ttl", "progress_at")
#: The fields a run's progress writes; a new attempt starts without them.
PROGRESS_FIELDS = ("progress", "message", "progress_at")


def key(result_id: str) -> str:
    return keys.task_status(result_id)


def valid_id(result_id: Any) -> bool:
    return isinstance(result_id, str) and bool(ID.match(result_id))


def check_id(result_id: Any, what: str = "task_id") -> str:
    """``result_id`` if a record may have it; else ``ValueError`` naming it, so a bad id is
    refused where the caller passed it, not found unreadable later."""
    if not valid_id(result_id):
        raise ValueError(f"{what} {result_id!r} cannot name a result: it must be {ID_RULE}")
    return result_id


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
        elif name == "progress":
            number = float(value)
            fields[name] = int(number) if number.is_integer() else number
        else:
            fields[name] = value.decode() if isinstance(value, bytes) else value
    return fields


def commands(result_id: str, fields: dict[str, Any], ttl: int) -> list[tuple[Any, ...]]:
    """The HSET and EXPIRE that write ``fields``, for a caller's own round trip (a push)."""
    parts = [part for pair in encode(fields).items() for part in pair]
    return [("HSET", key(result_id), *parts), ("EXPIRE", key(result_id), ttl)] if parts else []


def write(redis: Any, result_id: str, fields: dict[str, Any], ttl: int, *, drop: tuple[str, ...] = ()) -> None:
    """HSET the fields (and HDEL ``drop``), renewing the expiry, in one round trip (one
    ``MULTI``; on a Redis Cluster, where redis-py before 6.1 has no ``MULTI`` pipeline, the
    same commands in order on the record's node: one key, issue 46 item 3)."""
    pipe = redis.pipeline(transaction=not layout_of(redis).cluster)
    if drop:
        pipe.hdel(key(result_id), *drop)
    encoded = encode(fields)
    if encoded:
        pipe.hset(key(result_id), mapping=encoded)
    pipe.expire(key(result_id), ttl)
    pipe.execute()


def read(redis: Any, result_id: str) -> dict[str, Any] | None:
    raw = redis.hgetall(key(result_id))
    return decode(raw) if raw else None


async def aread(redis: Any, result_id: str) -> dict[str, Any] | None:
    """:func:`read` on a ``redis.asyncio`` client."""
    raw = await redis.hgetall(key(result_id))
    return decode(raw) if raw else None


def delete(redis: Any, result_id: str) -> None:
    redis.delete(key(result_id))


def ttl_left(redis: Any, result_id: str) -> int:
    """Seconds the record has left (Redis's TTL: -2 when there is none)."""
    return int(redis.ttl(key(result_id)))


# -- this process -----------------------------------------------------------------

#: Records of runs in this process; the oldest go first past this many.
LOCAL_LIMIT = 10_000

_local: OrderedDict[str, dict[str, Any]] = OrderedDict()
_lock = threading.Lock()


def local(result_id: str | None) -> dict[str, Any] | None:
    """The record of a run in this process (decoded fields; a failure keeps its exception)."""
    if result_id is None:
        return None
    with _lock:
        fields = _local.get(result_id)
        return dict(fields) if fields is not None else None


def update_local(result_id: str, fields: dict[str, Any], *, drop: tuple[str, ...] = ()) -> None:
    with _lock:
        record = _local.pop(result_id, {})
        for name in drop:
            record.pop(name, None)
        record.update(fields)
        _local[result_id] = record
        while len(_local) > LOCAL_LIMIT:
            _local.popitem(last=False)


def forget_local(result_id: str) -> bool:
    with _lock:
        return _local.pop(result_id, None) is not None
