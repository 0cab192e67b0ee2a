"""The worker side of ``WurkBackend``: the job that runs one task attempt (DJ-020, DJ-021).

``TaskJob`` is an ordinary registered job, so ``manage.py wurk`` needs
nothing special to run tasks; retries, the dead set and middleware work as
for any job. Around the call it keeps the result record up to date:

* before: ``RUNNING``, ``last_attempted_at``, ``started_at`` (first attempt),
  this worker's id appended; ``task_started`` is sent;
* success: ``SUCCESSFUL`` with the JSON-normalised return value;
* failure: the error appended, then ``READY`` when Sidekiq's rules will retry
  the job or ``FAILED`` when this was the last attempt; ``task_finished`` is
  sent from inside the ``except`` block, and the exception goes on to the
  retry layer.

The last-attempt decision mirrors the retry layer from the payload alone
(``retry``, ``retry_count``, ``retry_for``, ``WURK["MAX_RETRIES"]``). When the
retry layer decides otherwise (a ``retry_in`` hook that kills, a discard), its
``job_retried``/``job_died`` signals correct the record.
"""

from __future__ import annotations

import os
import socket
import time
from typing import Any

from .. import context, errors, payload, signals
from ..asyncrun import run_coroutine
from ..job import Job
from . import results
from .backend import WurkBackend
from .compat import TaskContext, TaskResultStatus, normalize_json, task_backends, task_finished, task_started

_worker_id: str | None = None

# A worker stopping, or a task asking to resume later: the attempt did not fail.
_NOT_A_FAILURE = (errors.Shutdown, errors.JobInterrupted, KeyboardInterrupt)


def set_worker_id(value: str | None) -> None:
    """Let the worker runtime name itself in ``TaskResult.worker_ids`` (e.g. its process identity)."""
    global _worker_id
    _worker_id = value[:64] if value else None


def worker_id() -> str:
    return _worker_id or f"{socket.gethostname()}:{os.getpid()}"[:64]


class TaskFailed(Exception):
    """A task ended with a ``BaseException`` (``SystemExit``...); carried to the retry layer as an error."""


def _retry_in(count: int, exc: BaseException, job: dict) -> str | None:
    # A refused payload will be refused again: straight to the dead set (DJ-020).
    return "kill" if isinstance(exc, results.RefusedTask) else None


def last_attempt(job: dict, max_retries: int, now: float | None = None) -> bool:
    """True when a failure of this attempt ends the job, by the rules the retry layer applies."""
    retry = job.get("retry")
    if not payload.truthy(retry):
        return True
    now = time.time() if now is None else now
    limit = retry if isinstance(retry, int) and not isinstance(retry, bool) else max_retries
    count = int(job.get("retry_count") or 0) + 1 if "retry_count" in job else 0
    retry_for = job.get("retry_for")
    if retry_for is not None:
        first_failed = payload.epoch_seconds(job.get("failed_at")) or now
        return first_failed + float(retry_for) < now
    return count >= limit


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

    def perform(self, task_args: list | None = None, task_kwargs: dict | None = None) -> None:
        job = self.payload or {}
        jid = self.jid or job.get("jid")
        meta = job.get("task") or {}
        ttl = int(meta.get("result_ttl") or results.DEFAULT_TTL)
        redis = context.current().redis  # the Redis the job came from: its result lives beside it
        task_args = list(task_args or [])
        task_kwargs = dict(task_kwargs or {})
        fields = self._start(redis, jid, job, meta, task_args, task_kwargs, ttl)
        try:
            task = results.rebuild_task(results.load_task(job.get("wrapped")), meta)
        except results.RefusedTask as exc:
            self._fail(redis, jid, fields, exc, ttl, final=True)
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
            fields["state"] = "interrupted"
            results.write(redis, jid, {"state": "interrupted"}, ttl)
            raise
        except BaseException as exc:
            final = last_attempt(job, context.current().config.max_retries)
            fields = self._fail(redis, jid, fields, exc, ttl, final=final)
            _apply(task_result, fields)
            task_finished.send(sender=sender, task_result=task_result)
            if isinstance(exc, Exception):
                raise
            raise TaskFailed(f"{type(exc).__name__}: {exc}") from exc
        now = payload.now_ms()
        update = {"state": "complete", "finished_at": now, "return_value": value}
        results.write(redis, jid, update, ttl)
        fields.update(update)
        _apply(task_result, fields)
        task_finished.send(sender=sender, task_result=task_result)

    def _start(self, redis: Any, jid: str, job: dict, meta: dict, task_args: list, task_kwargs: dict,
               ttl: int) -> dict[str, Any]:
        fields = results.read(redis, jid)
        if fields is None:
            # Expired while waiting for a retry, or pushed in fake mode: start again from the payload.
            fields = {
                "class": job.get("wrapped"), "task": meta, "args": task_args, "kwargs": task_kwargs,
                "errors": [], "worker_ids": [], "ttl": ttl,
                "enqueued_at": int((payload.epoch_seconds(job.get("enqueued_at") or job.get("created_at"))
                                    or time.time()) * 1000),
            }
        now = payload.now_ms()
        fields["state"] = "running"
        fields["last_attempted_at"] = now
        fields.setdefault("started_at", now)
        fields["worker_ids"] = [*fields.get("worker_ids", []), worker_id()]
        fields.pop("finished_at", None)
        results.write(redis, jid, fields, ttl, drop=("finished_at",))
        return fields

    def _fail(self, redis: Any, jid: str, fields: dict, exc: BaseException, ttl: int, *, final: bool) -> dict:
        fields = {**fields, "errors": [*fields.get("errors", []), results.error_of(exc)]}
        fields["state"] = "failed" if final else "retrying"
        if final:
            fields["finished_at"] = payload.now_ms()
        results.write(redis, jid, {k: fields[k] for k in ("state", "errors", "finished_at") if k in fields}, ttl)
        return fields


def _apply(task_result: Any, fields: dict[str, Any]) -> None:
    """Copy the record's outcome onto the ``TaskResult`` handed to signal receivers."""
    state = fields.get("state", "")
    object.__setattr__(task_result, "status", results.STATUS_OF.get(state, TaskResultStatus.READY))
    object.__setattr__(task_result, "finished_at", results.to_datetime(fields.get("finished_at")))
    object.__setattr__(task_result, "errors", results.build_errors(fields.get("errors")))
    if state == "complete":
        object.__setattr__(task_result, "_return_value", fields.get("return_value"))


def _correct(jid: Any, state: str) -> None:
    if not results.valid_id(jid):
        return
    redis = context.current().redis  # where the job ran or died
    fields = results.read(redis, jid)
    if fields is None or fields.get("state") == state:
        return
    ttl = int(fields.get("ttl") or results.DEFAULT_TTL)
    if state == "dead":
        results.write(redis, jid, {"state": state, "finished_at": fields.get("finished_at") or payload.now_ms()}, ttl)
    else:
        results.write(redis, jid, {"state": state}, ttl, drop=("finished_at",))


def _on_died(sender: Any, job: dict, **kwargs: Any) -> None:
    _correct(job.get("jid"), "dead")


def _on_retried(sender: Any, job: dict, **kwargs: Any) -> None:
    _correct(job.get("jid"), "retrying")


signals.job_died.connect(_on_died, sender=TaskJob, dispatch_uid="wurk_django.tasks.died")
signals.job_retried.connect(_on_retried, sender=TaskJob, dispatch_uid="wurk_django.tasks.retried")
