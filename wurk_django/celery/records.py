"""Writing a task's result record: in Redis (``status:<jid>``, the layout of
:mod:`wurk_django.result_store`) when a worker runs it, in this process's memory when
it runs here (``apply()``, the testing modes), where :class:`AsyncResult` looks first.

A job asks for a record with the payload key ``result_ttl`` (seconds the record is
kept after its last change); a task with ``ignore_result=True`` pushes none, and
nothing is written for it.
"""

from __future__ import annotations

import threading
import traceback as tb
from collections import OrderedDict
from typing import Any

from .. import payload, result_store

#: Records of runs in this process; the oldest go first past this many.
LOCAL_LIMIT = 10_000

_local: OrderedDict[str, dict[str, Any]] = OrderedDict()
_lock = threading.Lock()


def ttl_of(job: dict) -> int | None:
    """The record's lifetime the payload asks for, or ``None`` (no record)."""
    ttl = job.get("result_ttl")
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 1:
        return None
    return ttl


def first_fields(job: dict) -> dict[str, Any]:
    """The record a push writes: the task is waiting."""
    return {"state": "scheduled" if "at" in job else "enqueued", "class": job.get("class"),
            "enqueued_at": payload.now_ms(), "ttl": ttl_of(job)}


def error_of(exc: BaseException) -> dict[str, Any]:
    """One failed attempt as stored: the django.tasks fields, plus the message and the
    arguments (when JSON can carry them) to rebuild the exception where it is read."""
    kind = type(exc)
    error: dict[str, Any] = {
        "exception_class_path": f"{kind.__module__}.{kind.__qualname__}",
        "traceback": "".join(tb.format_exception(exc)),
        "message": str(exc),
    }
    try:
        args = payload.loads(payload.dumps(list(exc.args)))
    except (TypeError, ValueError):
        args = None
    if args is not None and args == list(exc.args):
        error["args"] = args
    return error


# -- this process -----------------------------------------------------------------


def local(jid: str | None) -> dict[str, Any] | None:
    if jid is None:
        return None
    with _lock:
        fields = _local.get(jid)
        return dict(fields) if fields is not None else None


def update_local(jid: str, fields: dict[str, Any]) -> None:
    with _lock:
        record = _local.pop(jid, {})
        record.update(fields)
        _local[jid] = record
        while len(_local) > LOCAL_LIMIT:
            _local.popitem(last=False)


def forget_local(jid: str) -> bool:
    with _lock:
        return _local.pop(jid, None) is not None


# -- Redis ------------------------------------------------------------------------


def started(redis: Any, jid: str, name: str, ttl: int) -> None:
    """The attempt began: ``running``, in one round trip (``started_at`` only the first time)."""
    now = payload.now_ms()
    key = result_store.key(jid)
    pipe = redis.pipeline(transaction=True)
    pipe.hset(key, mapping={"state": "running", "class": name, "last_attempted_at": now, "ttl": ttl})
    pipe.hsetnx(key, "started_at", now)
    pipe.hdel(key, "finished_at")
    pipe.expire(key, ttl)
    pipe.execute()


def succeeded(redis: Any, jid: str, value: Any, ttl: int) -> None:
    result_store.write(redis, jid, {"state": "complete", "return_value": value,
                                    "finished_at": payload.now_ms()}, ttl)


def failed(redis: Any, jid: str, exc: BaseException, ttl: int) -> None:
    """An attempt failed: the error appended, ``retrying`` until the retry layer's
    decision arrives (:func:`settled`), so a reader never sees a failure that is retried."""
    stored = redis.hget(result_store.key(jid), "errors")
    errors = payload.loads(stored) if stored else []
    result_store.write(redis, jid, {"state": "retrying", "errors": [*errors, error_of(exc)]}, ttl)


def settled(redis: Any, job: dict, state: str) -> None:
    """The retry layer decided: ``retrying`` (booked for later) or ``failed`` (dead or
    discarded); or the worker skipped the job past its ``expires``: ``revoked``."""
    ttl, jid = ttl_of(job), job.get("jid")
    if ttl is None or not result_store.valid_id(jid):
        return
    fields: dict[str, Any] = {"state": state}
    if state in ("failed", "revoked"):
        fields["finished_at"] = payload.now_ms()
    result_store.write(redis, jid, fields, ttl)


def progress(redis: Any, jid: str, state: str, meta: Any, ttl: int) -> None:
    """``update_state``: a custom state (``PROGRESS``) and its JSON ``meta``."""
    result_store.write(redis, jid, {"custom_state": state, "meta": payload.dumps(meta).decode()}, ttl)
