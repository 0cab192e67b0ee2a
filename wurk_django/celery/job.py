"""The job class behind every Celery-style task: an ordinary :class:`~wurk_django.job.Job`
whose ``perform`` calls the task's function, plus what Celery's task object offers the
code it runs (``self.request``, ``self.retry()``, ``self.update_state()``).

On a worker the results feature (:mod:`wurk_django.results`) keeps the task's result
record in Redis from how the run ends, and the retry layer decides retries with
:func:`.retrying.retry_in` and the limit with :meth:`CeleryJob.retry_limit`. Run in this
process (``apply()``, ``WURK["TESTING"] = "inline"``, ``testing.drain``), the record is
kept in memory and a retry runs again at once, as a Celery eager task does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, ClassVar

from .. import context
from ..errors import JobInterrupted, Shutdown
from ..job import Job
from ..outcome import Outcome
from ..results import record, store
from . import django_settings as settings
from . import retrying
from .exceptions import MaxRetriesExceededError, Retry
from .request import Request, retries_of

#: The task instance this thread (or asyncio task) is running, for ``mytask.retry()``
#: and ``mytask.request`` called on the module-level task object.
running: ContextVar[CeleryJob | None] = ContextVar("wurk_celery_running", default=None)

# A worker stopping, or a job asking to resume later: the attempt did not fail.
_NOT_A_FAILURE = (Shutdown, JobInterrupted, KeyboardInterrupt)


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
    result_expires: ClassVar[int] = store.DEFAULT_TTL
    #: Default ``expires`` of each call (seconds or a timedelta), or None.
    expires: ClassVar[float | dt.timedelta | None] = None
    #: Check each call's arguments against the function's signature (Celery's ``typing``).
    typing: ClassVar[bool] = True
    #: Celery's ``"10/m"``: kept by a limiter shared by the cluster (see :mod:`.rate_limits`).
    rate_limit: ClassVar[str | int | None] = None

    #: A countdown is the time asked: the retry layer adds none of its own jitter (only
    #: ``retry_jitter`` with ``retry_backoff`` randomises, as Celery documents).
    retry_spread: ClassVar[bool] = False

    _request: Request | None = None
    _called_directly = False

    @classmethod
    def get_options(cls) -> dict[str, Any]:
        """The payload options; ``retry`` is the task's ``max_retries`` (``None``, Celery's
        "for ever", is ``WURK["MAX_RETRIES"]``). (``retry`` here is Celery's method, so
        the limit cannot be the class attribute wurk jobs use.)"""
        options = super().get_options()
        options["retry"] = True if cls.max_retries is None else cls.max_retries
        # Celery's order: a route for the task's name, then its own queue=, then the default queue.
        queue = settings.routed_queue(cls.job_name) or _own(cls, "queue") or settings.default_queue()
        if queue:
            options["queue"] = queue
        limits = settings.time_limits()
        for name, value in limits.items():
            options.setdefault(name, value)
        return options

    @classmethod
    def result_ttl(cls) -> int:
        """Seconds a result record is kept: the task's ``result_expires``, else
        ``CELERY_RESULT_EXPIRES``, else one day."""
        own = _own(cls, "result_expires")
        if own is None:
            own = settings.result_expires()
        return int(cls.result_expires if own is None else own)

    @classmethod
    def retry_in(cls, count: int, exc: BaseException, job: dict) -> float | str:  # type: ignore[override]
        """The retry layer asks how to retry a failure: see :mod:`.retrying`."""
        return retrying.retry_in(cls, count, exc)

    @classmethod
    def retry_limit(cls, job: dict, exc: BaseException) -> bool | int | None:
        """The retry layer asks how many retries this failure may have: ``self.retry(max_retries=N)``
        may ask for more than the task's ``max_retries`` (the payload's ``retry``); ``True`` is
        ``WURK["MAX_RETRIES"]`` (Celery's ``None``, "for ever"), ``None`` the payload's."""
        if isinstance(exc, Retry):
            return True if exc.max_retries is None else exc.max_retries
        return None

    @classmethod
    def result_error(cls, exc: BaseException) -> BaseException:
        """The error the result record shows for a failure: the one a retry is about."""
        return _cause(exc)

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
        jid = task_id or self.jid
        if jid is None or state is None:
            return
        record.progress(self.payload or {}, jid, state, meta, in_memory=not _on_worker())

    # -- running -----------------------------------------------------------------

    def perform(self, *args: Any, **kwargs: Any) -> Any:
        fn = type(self).fn
        limiter = type(self).rate_limiter() if type(self).rate_limit and _on_worker() else None
        if limiter is not None:
            # Over the rate, the limiter raises OverLimit and its middleware reschedules
            # the job; run here (apply(), eager), Celery ignores the rate too.
            with limiter.acquire():
                return fn(self, *args, **kwargs) if type(self).bind else fn(*args, **kwargs)
        return fn(self, *args, **kwargs) if type(self).bind else fn(*args, **kwargs)

    @classmethod
    def rate_limiter(cls) -> Any:
        """The limiter keeping this task's ``rate_limit`` (made once), or ``None``."""
        if "_limiter" not in cls.__dict__:
            from . import rate_limits

            cls._limiter = rate_limits.limiter_for(cls.job_name, cls.rate_limit)
        return cls._limiter

    def run(self, args: list, kwargs: dict[str, Any] | None = None) -> Any:
        token = running.set(self)
        try:
            if _on_worker():
                return self._run_on_worker(args, kwargs)
            return self._run_here(args, kwargs)
        finally:
            running.reset(token)

    def _announced_run(self, args: list, kwargs: dict[str, Any] | None) -> Any:
        """One attempt, with Celery's task signals around it (:mod:`.signals`)."""
        from . import signals

        if not (signals.task_prerun.receivers or signals.task_postrun.receivers or signals.task_success.receivers
                or signals.task_failure.receivers or signals.task_retry.receivers):
            return super().run(args, kwargs)
        task = type(self).task_object()
        request = self.request
        call = {"task_id": request.id, "args": list(args), "kwargs": dict(kwargs or {})}
        signals.task_prerun.send(sender=task, task=task, **call)
        try:
            value = super().run(args, kwargs)
        except _NOT_A_FAILURE:
            raise
        except Exception as exc:
            einfo = signals.ExceptionInfo(exc)
            if retrying.decide(type(self), request.retries, exc) is not None:
                state = "RETRY"
                signals.task_retry.send(sender=task, request=request, reason=_cause(exc), einfo=einfo)
            else:
                state = "FAILURE"
                final = _cause(exc)
                signals.task_failure.send(sender=task, exception=final, traceback=final.__traceback__,
                                          einfo=einfo, **call)
            signals.task_postrun.send(sender=task, task=task, retval=exc, state=state, **call)
            raise
        signals.task_success.send(sender=task, result=value)
        signals.task_postrun.send(sender=task, task=task, retval=value, state="SUCCESS", **call)
        return value

    @classmethod
    def task_object(cls) -> Any:
        """The ``@shared_task`` object of this class: the ``sender`` of Celery's task signals."""
        return cls.__dict__.get("_task") or cls

    def _run_on_worker(self, args: list, kwargs: dict[str, Any] | None) -> Any:
        value = self._announced_run(args, kwargs)
        record.returned(value)  # the results feature writes it once the run has ended well
        return value

    def _run_here(self, args: list, kwargs: dict[str, Any] | None) -> Any:
        job = dict(self.payload or {})
        while True:
            attempt = record.begin_here(job, in_memory=True)
            try:
                value = self._announced_run(args, kwargs)
            except _NOT_A_FAILURE:
                raise
            except Exception as exc:
                retries = retries_of(job)
                delay = retrying.decide(type(self), retries, exc)
                final = _cause(exc) if isinstance(exc, Retry) else exc
                if attempt is not None:
                    attempt.end(Outcome.RETRIED if delay is not None else Outcome.DEAD, final)
                if delay is not None:
                    # Run here, a retry runs again at once, as a Celery eager task's does.
                    job["retry_count"] = retries
                    self.payload, self._request = job, None
                    continue
                if final is not exc:
                    raise final from exc
                raise
            if attempt is not None:
                record.returned(value)
                attempt.end(Outcome.SUCCEEDED, None)
            return value


def _own(cls: type, name: str) -> Any:
    """An option the task's decorator set (not inherited from :class:`CeleryJob`)."""
    for klass in cls.__mro__:
        if klass is CeleryJob:
            return None
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


def _on_worker() -> bool:
    """A worker fetched this job (not ``apply()``, ``perform_inline`` or a testing mode)."""
    ctx = context.running()
    return ctx is not None and ctx.unit is not None


def _cause(exc: BaseException) -> BaseException:
    """The error a retry is about (``self.retry(exc=...)``), else the exception itself."""
    if isinstance(exc, Retry):
        return exc.exc if exc.exc is not None else MaxRetriesExceededError(str(exc))
    return exc
