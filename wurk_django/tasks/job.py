"""The worker side of ``WurkBackend``: the job that runs one task attempt (DJ-020, DJ-021).

``TaskJob`` is an ordinary registered job, so ``manage.py wurk`` needs
nothing special to run tasks; retries, the dead set and middleware work as
for any job. Its result record is kept by the results feature
(:mod:`wurk_django.results`): ``RUNNING`` as the attempt starts (``last_attempted_at``,
``started_at`` the first time, this worker's id appended), then, once the run ends,
``SUCCESSFUL`` with the JSON-normalised return value, or the error appended and
``READY`` when the retry layer will retry the job, ``FAILED`` when it will not (or when
the job dies any other way).

Around the call ``task_started`` and ``task_finished`` are sent with the ``TaskResult``
as the record will read: ``task_finished`` from inside the ``except`` block on a failure,
its status decided by the one retry rule (:func:`wurk_django.server.retry.exhausted`),
and the exception goes on to the retry layer.

Run in this process instead (``testing.execute``, the inline testing mode), the job
writes its record itself through the same writer.
"""

from __future__ import annotations

from typing import Any

from .. import context, errors
from ..asyncrun import run_coroutine
from ..job import Job
from ..outcome import Outcome
from ..payload import now_ms as payload_now
from ..results import record
from ..results.record import set_worker_id, worker_id  # noqa: F401 - the worker runtime names itself here
from . import results
from .backend import WurkBackend
from .compat import TaskContext, normalize_json, task_backends, task_finished, task_started

# A worker stopping, or a task asking to resume later: the attempt did not fail.
_NOT_A_FAILURE = (errors.Shutdown, errors.JobInterrupted, KeyboardInterrupt)


class TaskFailed(Exception):
    """A task ended with a ``BaseException`` (``SystemExit``...); carried to the retry layer as an error."""


def _retry_in(count: int, exc: BaseException, job: dict) -> str | None:
    # A refused payload will be refused again: straight to the dead set (DJ-020).
    return "kill" if isinstance(exc, results.RefusedTask) else None


def last_attempt(job_class: Any, job: dict, exc: BaseException) -> bool:
    """True when this failure ends the job: the retry layer's rule, and a refused payload."""
    if isinstance(exc, results.RefusedTask):
        return True
    from ..server import retry  # a task runs on a worker, or in a process running jobs inline

    config = context.current().config
    return retry.exhausted(job, retry.limit_of(job, config.max_retries, job_class, exc))


def _sender(alias: str) -> type:
    try:
        backend = task_backends[alias]
    except Exception:  # noqa: BLE001 - this process may lack the alias; the signal still goes out
        return WurkBackend
    return type(backend) if isinstance(backend, WurkBackend) else WurkBackend


class TaskJob(Job):
    """Runs the ``django.tasks`` task named in the payload's ``wrapped``."""

    name = "wurk_django.tasks.TaskJob"
    retry_in = staticmethod(_retry_in)

    @classmethod
    def result_error(cls, exc: BaseException) -> BaseException:
        """The record shows the task's own ``BaseException``, not the :class:`TaskFailed` carrying it."""
        return exc.__cause__ if isinstance(exc, TaskFailed) and exc.__cause__ is not None else exc

    def perform(self, task_args: list | None = None, task_kwargs: dict | None = None) -> None:
        job = self.payload or {}
        jid = self.jid or job.get("jid")
        meta = job.get("task") or {}
        task_args = list(task_args or [])
        task_kwargs = dict(task_kwargs or {})
        ctx = context.running()
        here = ctx is None or ctx.unit is None  # not fetched by a worker: this job writes its record
        attempt = record.begin_here(job, in_memory=False) if here else record.current()
        if attempt is not None and attempt.jid != jid:
            attempt = None
        fields: dict[str, Any] = dict(attempt.fields) if attempt is not None else {"state": "running"}
        try:
            task = results.rebuild_task(results.load_task(job.get("wrapped")), meta)
        except results.RefusedTask as exc:
            if here and attempt is not None:
                attempt.end(Outcome.DEAD, exc)
            raise
        task_result = results.build_result(fields, jid, task=task)
        sender = _sender(meta.get("backend", task.backend))
        task_started.send(sender=sender, task_result=task_result)
        try:
            if task.takes_context:
                value = task.func(TaskContext(task_result=task_result), *task_args, **task_kwargs)
            else:
                value = task.func(*task_args, **task_kwargs)
            if hasattr(value, "__await__"):
                value = run_coroutine(value)
            value = normalize_json(value)  # a non-JSON return value fails the attempt (DJ-021)
        except _NOT_A_FAILURE:
            if here and attempt is not None:
                attempt.end(Outcome.INTERRUPTED, None)
            raise
        except BaseException as exc:
            final = last_attempt(type(self), job, exc)
            if here and attempt is not None:
                attempt.end(Outcome.DEAD if final else Outcome.RETRIED, exc)
            fields = {**fields, "state": "failed" if final else "retrying",
                      "errors": [*(fields.get("errors") or []), results.error_of(exc)]}
            if final:
                fields["finished_at"] = payload_now()
            _apply(task_result, fields)
            task_finished.send(sender=sender, task_result=task_result)
            if isinstance(exc, Exception):
                raise
            raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
        record.returned(value)
        if here and attempt is not None:
            attempt.end(Outcome.SUCCEEDED, None)
        fields.update({"state": "complete", "finished_at": payload_now(), "return_value": value})
        _apply(task_result, fields)
        task_finished.send(sender=sender, task_result=task_result)


def _apply(task_result: Any, fields: dict[str, Any]) -> None:
    """Copy the record's outcome onto the ``TaskResult`` handed to signal receivers."""
    state = fields.get("state", "")
    object.__setattr__(task_result, "status", results.status_of(state))
    object.__setattr__(task_result, "finished_at", results.to_datetime(fields.get("finished_at")))
    object.__setattr__(task_result, "errors", results.build_errors(fields.get("errors")))
    if state == "complete":
        object.__setattr__(task_result, "_return_value", fields.get("return_value"))
