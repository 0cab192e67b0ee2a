"""Task results as Django's ``TaskResult``: a view of the result records the results
feature keeps (:mod:`wurk_django.results`: one hash per task at ``status:<jid>``, DJ-018,
DJ-019, written by :mod:`wurk_django.results.record` alone).

The backend's push writes the first record in the same round trip as the job; the
worker's observer updates it around every attempt; every write renews its expiry
(``RESULT_TTL``). What the ``django.tasks`` backend adds to a record:

``class``        the task's ``module_path``
``task``         ``{"priority", "queue_name", "backend", "run_after" (ISO 8601), "takes_context", "retry",
                 "result_ttl"}``, and ``"deadline"`` (epoch seconds) when the task has one
``args``/``kwargs``  what the task is called with
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from django.utils import timezone
from django.utils.module_loading import import_string

from .. import deadline as deadlines

# Re-exported: the backend uses them as results.<name>.
from ..results.record import error_of  # noqa: F401
from ..results.states import TASKS, of
from ..results.store import DEFAULT_TTL, aread, decode, key, read, valid_id  # noqa: F401
from .compat import (
    InvalidTask,
    InvalidTaskBackend,
    Task,
    TaskError,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
)

#: Record states as Django sees them (the one vocabulary's ``django.tasks`` names).
STATUS_OF = {str(state): TaskResultStatus[name] for state, name in TASKS.items() if state is not None} | {
    "dead": TaskResultStatus.FAILED}


def status_of(state: str | None) -> TaskResultStatus:
    return TaskResultStatus[TASKS[of(state)]]


def task_meta(task: Task) -> dict[str, Any]:
    run_after = task.run_after
    meta = {
        "priority": task.priority,
        "queue_name": task.queue_name,
        "backend": task.backend,
        "run_after": run_after.isoformat() if run_after is not None else None,
        "takes_context": task.takes_context,
        "retry": getattr(task, "retry", None),
    }
    deadline = getattr(task, "deadline", None)
    if deadline is not None:  # only when given: a record without one is unchanged
        meta["deadline"] = deadlines.to_epoch(deadline)
    return meta


def run_after_epoch(when: dt.datetime) -> float:
    if timezone.is_naive(when):
        # Only possible with USE_TZ=False; Django reads naive times in TIME_ZONE.
        when = timezone.make_aware(when, timezone.get_default_timezone())
    return when.timestamp()


def to_datetime(ms: int | None) -> dt.datetime | None:
    """Epoch ms as Django's own timestamps look: aware UTC, or naive local without USE_TZ."""
    if ms is None:
        return None
    from django.conf import settings

    value = dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)
    return value if settings.USE_TZ else timezone.make_naive(value, timezone.get_default_timezone())


class RefusedTask(Exception):  # noqa: N818 - describes the outcome, like Django's TaskResultMismatch
    """A payload names something that is not a ``django.tasks.Task``; nothing was run."""


def load_task(module_path: Any) -> Task:
    """The ``Task`` object the ``@task`` decorator left at ``module_path``.

    Anything else (a plain function, a class, a missing name) is refused, so
    a payload can never make the worker call an arbitrary callable.
    """
    if not isinstance(module_path, str) or "." not in module_path:
        raise RefusedTask(f"{module_path!r} is not the dotted path of a task")
    from .. import registry

    module_name = module_path.rpartition(".")[0]
    if not registry.may_import(module_name):
        # A payload must never run a module's import-time code outside the allowed apps.
        raise RefusedTask(f"{module_path!r} is outside the modules a payload may import "
                          "(the installed apps, or WURK['IMPORT_ON_MISS'])")
    try:
        target = import_string(module_path)
    except ImportError as exc:
        raise RefusedTask(f"cannot import task {module_path!r}: {exc}") from exc
    if not isinstance(target, Task):
        raise RefusedTask(f"{module_path!r} is a {type(target).__name__}, not a django.tasks Task; refusing to run it")
    return target


def rebuild_task(target: Task, meta: dict[str, Any]) -> Task:
    """``target`` with the priority/queue/backend/run_after it was enqueued with."""
    changes: dict[str, Any] = {}
    for name in ("priority", "queue_name", "backend"):
        if name in meta and meta[name] != getattr(target, name):
            changes[name] = meta[name]
    if meta.get("run_after") is not None:
        changes["run_after"] = dt.datetime.fromisoformat(meta["run_after"])
    if isinstance(meta.get("deadline"), (int, float)) and hasattr(target, "deadline"):
        changes["deadline"] = dt.datetime.fromtimestamp(meta["deadline"], dt.UTC)
    if not changes:
        return target
    import dataclasses

    try:
        return dataclasses.replace(target, **changes)
    except (InvalidTask, InvalidTaskBackend):
        # This process's TASKS may not accept the stored values (e.g. no such alias);
        # the function is what matters, the rest is informational.
        return target


def build_errors(stored: list[dict[str, str]] | None) -> list[TaskError]:
    return [TaskError(exception_class_path=e["exception_class_path"], traceback=e["traceback"]) for e in stored or []]


def build_result(fields: dict[str, Any], jid: str, task: Task | None = None) -> TaskResult:
    """A ``TaskResult`` from a decoded record; raises ``TaskResultDoesNotExist`` if unusable."""
    meta = fields.get("task") or {}
    if task is None:
        try:
            task = rebuild_task(load_task(fields.get("class")), meta)
        except RefusedTask as exc:
            raise TaskResultDoesNotExist(f"result {jid} belongs to a task that cannot be loaded: {exc}") from exc
    status = status_of(fields.get("state"))
    result = TaskResult(
        task=task,
        id=jid,
        status=status,
        enqueued_at=to_datetime(fields.get("enqueued_at")),
        started_at=to_datetime(fields.get("started_at")),
        finished_at=to_datetime(fields.get("finished_at")),
        last_attempted_at=to_datetime(fields.get("last_attempted_at")),
        args=fields.get("args") or [],
        kwargs=fields.get("kwargs") or {},
        backend=meta.get("backend", task.backend),
        errors=build_errors(fields.get("errors")),
        worker_ids=list(fields.get("worker_ids") or []),
    )
    if status == TaskResultStatus.SUCCESSFUL:
        object.__setattr__(result, "_return_value", fields.get("return_value"))
    return result
