"""Receivers of Celery's signals that record each call in Redis (``test:signals``), so a
test reads what a worker process sent: the signal, the sender and the keyword names."""

from __future__ import annotations

import json
from typing import Any

from wurk_django.celery import signals

RECORDED = ("before_task_publish", "after_task_publish", "task_prerun", "task_postrun", "task_success",
            "task_failure", "task_retry", "task_revoked", "worker_process_init", "worker_ready", "worker_shutdown")


def _describe(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_describe(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _describe(v) for k, v in value.items()}
    return type(value).__name__


def _recorder(name: str):
    def record(sender: Any = None, **kwargs: Any) -> None:
        from wurk_django.redis.app import redis_client

        kwargs.pop("signal", None)
        entry = {"signal": name, "sender": getattr(sender, "name", None) if not isinstance(sender, str) else sender,
                 "kwargs": sorted(kwargs), "values": {k: _describe(v) for k, v in kwargs.items()
                                                      if k in ("task_id", "args", "kwargs", "retval", "state",
                                                               "result", "expired", "routing_key", "exchange")}}
        redis_client().rpush("test:signals", json.dumps(entry))

    record.__name__ = f"record_{name}"
    return record


for _name in RECORDED:
    getattr(signals, _name).connect(_recorder(_name), weak=False, dispatch_uid=f"tests.celery_compat.{_name}")
