"""The job class behind every Celery-style task: an ordinary :class:`~wurk_django.job.Job`
whose ``perform`` calls the task's function, plus what Celery's task object offers the
code it runs (``self.request``, ``self.retry()``, ``self.update_state()``).

On a worker the run keeps the task's result record in Redis and the retry layer
decides retries with :func:`.retrying.retry_in`. Run in this process (``apply()``,
``WURK["TESTING"] = "inline"``, ``testing.drain``), the record is kept in memory and a
retry runs again at once, as a Celery eager task does.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, ClassVar

import redis as redis_lib

from .. import context, payload, result_store
from ..errors import JobInterrupted, Shutdown
from ..job import Job
from . import records, retrying
from .exceptions import MaxRetriesExceededError, Retry
from .request import Request, retries_of

#: The task instance this thread (or asyncio task) is running, for ``mytask.retry()``
#: and ``mytask.request`` called on the module-level task object.
running: ContextVar[CeleryJob | None] = ContextVar("wurk_celery_running", default=None)

logger = logging.getLogger("wurk_django.worker")

# A worker stopping, or a job asking to resume later: the attempt did not fail.
_NOT_A_FAILURE = (Shutdown, JobInterrupted, KeyboardInterrupt)
_UNREACHABLE = (redis_lib.ConnectionError, redis_lib.TimeoutError)


def _record(write: Callable[..., None], *args: Any) -> None:
    """Write to the result record; Redis unreachable for it loses the record's update (logged),
    never the job: the task's own outcome is still booked by the worker as usual. A thread
    the worker abandoned (a hard time limit, a revoke) that comes back late writes nothing:
    the record is the settlement's."""
    if _late():
        logger.info("job %s came back after its thread was abandoned: its result record stays as settled", args[1])
        return
    try:
        write(*args)
    except _UNREACHABLE as exc:
        logger.warning("the result record of job %s was not updated (%s: %s)", args[1], type(exc).__name__, exc)


class CeleryJob(Job):
    """Base class of the job classes ``@shared_task`` makes; options are Celery's."""

    #: The task's function (a staticmethod on each task's class).
    fn: ClassVar[Callable[..., Any]]
    bind: ClassVar[bool] = False
    max_retries: ClassVar[int | None] = 3
    default_retry_delay: ClassVar[float] = 180
    autoretry_for: ClassVar[tuple[type[BaseException], ...]] = ()
    dont_autoretry_for: ClassVar[tuple[type[BaseException], ...]] = ()
    retry_kwargs: ClassVar[dict[str, Any] | None] = None
    retry_backoff: ClassVar[bool | int] = False
    retry_backoff_max: ClassVar[float | None] = 600
    retry_jitter: ClassVar[bool] = True
    ignore_result: ClassVar[bool] = False
    #: Seconds a result record is kept after its last change (Celery's ``result_expires``).
    result_expires: ClassVar[int] = result_store.DEFAULT_TTL
    #: Default ``expires`` of each call (seconds or a timedelta), or None.
    expires: ClassVar[float | dt.timedelta | None] = None
    #: Check each call's arguments against the function's signature (Celery's ``typing``).
    typing: ClassVar[bool] = True

    _request: Request | None = None
    _called_directly = False

    @classmethod
    def get_options(cls) -> dict[str, Any]:
        """The payload options; ``retry`` is the task's ``max_retries`` (``None``, Celery's
        "for ever", is ``WURK["MAX_RETRIES"]``). (``retry`` here is Celery's method, so
        the limit cannot be the class attribute wurk jobs use.)"""
        options = super().get_options()
        options["retry"] = True if cls.max_retries is None else cls.max_retries
        return options

    @classmethod
    def retry_in(cls, count: int, exc: BaseException, job: dict) -> float | str:  # type: ignore[override]
        """The retry layer asks how to retry a failure: see :mod:`.retrying`."""
        return retrying.retry_in(cls, count, exc)

    # -- what the task's code sees ----------------------------------------------

    @property
    def request(self) -> Request:
        """This call: ``id``, ``retries``, ``args``, ``kwargs``, ``queue``... (see :class:`Request`)."""
        if self._request is None:
            self._request = Request.from_payload(self.payload or {}, is_eager=not _on_worker())
            self._request.called_directly = self._called_directly
        return self._request

    def retry(self, args: Any = None, kwargs: Any = None, exc: BaseException | None = None, throw: bool = True,
              eta: dt.datetime | None = None, countdown: float | None = None, max_retries: int | None = None,
              **options: Any) -> Retry:
        """End this run and try again after ``countdown`` seconds (or at ``eta``; default
        ``default_retry_delay``), at most ``max_retries`` retries (default the task's).
        Past the limit, ``exc`` is raised (or :class:`MaxRetriesExceededError`). Always
        raises; Celery's ``raise self.retry(...)`` reads the same."""
        if args is not None or kwargs is not None or options or not throw:
            given = [n for n, v in (("args", args), ("kwargs", kwargs)) if v is not None] + sorted(options)
            raise TypeError(f"retry() here takes exc, eta, countdown and max_retries; not {given or ['throw=False']}: "
                            "a retry runs the same call again")
        limit = type(self).max_retries if max_retries is None else max_retries
        retries = self.request.retries
        if limit is not None and retries >= limit:
            if exc is not None:
                raise exc
            raise MaxRetriesExceededError(f"{type(self).job_name}[{self.jid}] used its {limit} retries")
        when: float | None = countdown
        if when is None and eta is not None:
            from ..job import _run_at

            when = max(0.0, _run_at(eta) - dt.datetime.now(dt.UTC).timestamp())
        raise Retry(exc=exc, when=when, max_retries=limit)

    def update_state(self, task_id: str | None = None, state: str | None = None, meta: Any = None) -> None:
        """A custom state (``"PROGRESS"``) and its JSON ``meta`` for :class:`AsyncResult`
        readers while the task runs; ``.info`` returns the ``meta``."""
        job = self.payload or {}
        ttl = records.ttl_of(job)
        jid = task_id or self.jid
        if ttl is None or jid is None or state is None:
            return
        if _on_worker():
            records.progress(context.current().redis, jid, state, meta, ttl)
        else:
            records.update_local(jid, {"custom_state": state, "meta": payload.dumps(meta).decode()})

    # -- running -----------------------------------------------------------------

    def perform(self, *args: Any, **kwargs: Any) -> Any:
        fn = type(self).fn
        return fn(self, *args, **kwargs) if type(self).bind else fn(*args, **kwargs)

    def run(self, args: list, kwargs: dict[str, Any] | None = None) -> Any:
        token = running.set(self)
        try:
            if _on_worker():
                return self._run_on_worker(args, kwargs)
            return self._run_here(args, kwargs)
        finally:
            running.reset(token)

    def _run_on_worker(self, args: list, kwargs: dict[str, Any] | None) -> Any:
        ctx = context.current()
        job = self.payload or {}
        ttl, jid = records.ttl_of(job), self.jid
        keep = ttl is not None and result_store.valid_id(jid)
        if keep:
            _record(records.started, ctx.redis, jid, type(self).job_name, ttl)
        try:
            value = super().run(args, kwargs)
            if keep:
                _record(records.succeeded, ctx.redis, jid, value, ttl)  # a value JSON cannot carry fails the run
        except _NOT_A_FAILURE:
            if keep:
                _record(result_store.write, ctx.redis, jid, {"state": "interrupted"}, ttl)
            raise
        except BaseException as exc:
            if isinstance(exc, Retry):
                _allow_retries(ctx, exc.max_retries)
            if keep:
                _record(records.failed, ctx.redis, jid, _cause(exc), ttl)
            raise
        return value

    def _run_here(self, args: list, kwargs: dict[str, Any] | None) -> Any:
        job = dict(self.payload or {})
        jid = self.jid
        keep = records.ttl_of(job) is not None and jid is not None
        errors: list[dict[str, Any]] = []
        while True:
            if keep:
                records.update_local(jid, {"state": "running", "class": type(self).job_name})
            try:
                value = super().run(args, kwargs)
            except _NOT_A_FAILURE:
                raise
            except Exception as exc:
                retries = retries_of(job)
                delay = retrying.decide(type(self), retries, exc)
                errors.append(records.error_of(_cause(exc)))
                if delay is not None:
                    # Run here, a retry runs again at once, as a Celery eager task's does.
                    job["retry_count"] = retries
                    self.payload, self._request = job, None
                    continue
                final = _cause(exc) if isinstance(exc, Retry) else exc
                if keep:
                    records.update_local(jid, {"state": "failed", "exception": final, "errors": errors})
                if final is not exc:
                    raise final from exc
                raise
            if keep:
                records.update_local(jid, {"state": "complete", "return_value": value, "errors": errors})
            return value


def _on_worker() -> bool:
    """A worker fetched this job (not ``apply()``, ``perform_inline`` or a testing mode)."""
    ctx = context.running()
    return ctx is not None and ctx.unit is not None


def _cause(exc: BaseException) -> BaseException:
    """The error a retry is about (``self.retry(exc=...)``), else the exception itself."""
    if isinstance(exc, Retry):
        return exc.exc if exc.exc is not None else MaxRetriesExceededError(str(exc))
    return exc


def _allow_retries(ctx: Any, limit: int | None) -> None:
    """``self.retry(max_retries=N)`` may ask for more retries than the payload's ``retry``
    allows: the retry layer books from the fetched bytes (``ctx.raw``), so the limit this
    call asked for is written there; every later attempt keeps it."""
    if ctx.raw is None:
        return
    job = payload.loads(ctx.raw)
    wanted: bool | int = True if limit is None else limit
    if job.get("retry") != wanted:
        job["retry"] = wanted
        ctx.raw = payload.dumps(job)


def _late() -> bool:
    """True on the thread of a run the worker abandoned: its late writes must change nothing."""
    import threading

    from ..server.run import run as runs  # only ever asked on a worker, which has loaded it

    current = runs.current()
    return current is not None and current.abandoned and threading.current_thread() is current.thread


def _died(sender: Any, job: dict, **kwargs: Any) -> None:
    """The retry layer ended the job (dead set or discarded): the record says ``failed``. A run
    the worker abandoned never noted its attempt's error (its thread did not come back): the
    settlement notes it here, so the record says why."""
    redis = context.current().redis
    exc, ttl, jid = kwargs.get("exception"), records.ttl_of(job), job.get("jid")
    if exc is not None and ttl is not None and result_store.valid_id(jid) and _abandoned_here():
        _record(records.failed, redis, jid, exc, ttl)
    records.settled(redis, job, "failed")


def _abandoned_here() -> bool:
    """The job dies in the settlement of an abandoned run (not on the job's own thread)."""
    ctx = context.running()
    if ctx is None or ctx.unit is None:
        return False
    from ..server.run import run as runs

    current = runs.current()
    return current is not None and current.abandoned


def _expired(sender: Any, job: dict, **kwargs: Any) -> None:
    """The worker skipped the job past its ``expires``: the record says ``REVOKED``, as Celery's does."""
    records.settled(context.current().redis, job, "revoked")
