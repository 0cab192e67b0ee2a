"""``@shared_task``: a function becomes a Celery-style task, a thin layer over a
:class:`~wurk_django.job.Job` class (:class:`.job.CeleryJob`) and the
:class:`~wurk_django.job.JobFunction` wrapper every ``@job`` function is.

::

    from wurk_django.celery import shared_task

    @shared_task(bind=True, autoretry_for=(ConnectionError,), retry_backoff=True, max_retries=5)
    def sync_account(self, account_id, *, full=False):
        ...

    result = sync_account.delay(42, full=True)
    result.get(timeout=30)
"""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from typing import Any

from ..job import OPTION_NAMES, JobFunction
from . import calling, rate_limits
from .job import CeleryJob, running
from .request import Request
from .result import AsyncResult

#: Celery task options and what they become.
CELERY_OPTIONS = frozenset({"name", "queue", "bind", "max_retries", "default_retry_delay", "autoretry_for",
                            "dont_autoretry_for", "retry_kwargs", "retry_backoff", "retry_backoff_max",
                            "retry_jitter", "ignore_result", "result_expires", "soft_time_limit", "time_limit",
                            "expires", "typing", "rate_limit"})
#: Accepted and ignored: wurk already behaves so, or nothing corresponds.
IGNORED_OPTIONS = frozenset({"acks_late", "acks_on_failure_or_timeout", "reject_on_worker_lost", "track_started",
                             "serializer", "trail", "store_errors_even_if_ignored", "priority", "throws",
                             "send_events", "compression", "lazy",
                             # AMQP message properties: a Redis list has no exchanges, routing
                             # keys or persistence modes (every job is kept until it ran).
                             "delivery_mode", "routing_key", "exchange", "exchange_type"})
IGNORED_NOTE = "wurk already behaves so, or a Redis list has nothing that corresponds"
REFUSED = {
    "base": "custom Task base classes are not supported (base=Task and base=DjangoTask are accepted): "
            "use the task signals (wurk_django.celery.signals) or subclass wurk_django.celery.CeleryJob",
    "retry": "use max_retries (the number of retries) with autoretry_for or self.retry()",
}
#: wurk's own job options, for a task that wants them (``tags``, ``retry_queue``...).
JOB_OPTIONS = frozenset(OPTION_NAMES) - {"retry", "queue", "expires_in"} | {"job_options", "shard"}


class Task(JobFunction):
    """What ``@shared_task`` returns: the function (calling it runs it here), with
    Celery's call API (``delay``, ``apply_async``, ``apply``, ``AsyncResult``, ``retry``,
    ``request``) and wurk's (``perform_async``, ``set``...; every method of
    :class:`~wurk_django.job.JobFunction`)."""

    job_class: type[CeleryJob]

    def __init__(self, fn: Callable[..., Any], job_class: type[CeleryJob]) -> None:
        super().__init__(fn, job_class)
        self.name = job_class.job_name
        job_class._task = self  # the sender of Celery's task signals

    def __repr__(self) -> str:
        return f"<@task: {self.name}>"

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the function here and now, as Celery's ``task(...)`` does (no queue, no record)."""
        if not self.job_class.bind:
            return self.fn(*args, **kwargs)
        instance = self.job_class()
        instance.payload = {"class": self.name, "args": list(args), "kwargs": kwargs}
        instance._called_directly = True
        token = running.set(instance)
        try:
            return self.fn(instance, *args, **kwargs)
        finally:
            running.reset(token)

    def __getattr__(self, name: str) -> Any:
        if name in CELERY_OPTIONS or name in JOB_OPTIONS:
            return getattr(self.job_class, name)
        if name in IGNORED_OPTIONS:
            # Celery shows every option as a task attribute; an ignored one reads as given.
            ignored = self.job_class.__dict__.get("ignored_options", {})
            if name in ignored:
                return ignored[name]
            raise AttributeError(f"{self.name} was not given {name}= (wurk ignores it: {IGNORED_NOTE})")
        return super().__getattr__(name)

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult | None:
        """Push the call: ``apply_async(args, kwargs)``."""
        return calling.apply_async(self.job_class, args, kwargs)

    def apply_async(self, args: Any = None, kwargs: Any = None, **options: Any) -> AsyncResult | None:
        """Push the call with Celery's options (``countdown``, ``eta``, ``expires``,
        ``queue``, ``task_id``, ``ignore_result``, ``soft_time_limit``, ``time_limit``,
        ``retry``/``retry_policy``...; see :mod:`.calling`), and wurk's ``deadline`` (with
        ``deadline_action``): an absolute time by which the call must have run."""
        if options.get("link") is not None or options.get("link_error") is not None:
            return self.signature(args, kwargs).apply_async(**options)  # the canvas carries callbacks
        return calling.apply_async(self.job_class, args, kwargs, **options)

    def delay_on_commit(self, *args: Any, **kwargs: Any) -> None:
        """``delay()`` once the current database transaction commits (at once outside one;
        never if it rolls back), as Celery 5.4's ``DjangoTask`` does. Returns ``None``: the
        call has no id until it is pushed."""
        from django.db import transaction

        transaction.on_commit(functools.partial(self.delay, *args, **kwargs))

    def apply_async_on_commit(self, args: Any = None, kwargs: Any = None, using: str | None = None,
                              **options: Any) -> None:
        """``apply_async()`` once the transaction of database ``using`` commits (see
        :meth:`delay_on_commit`)."""
        from django.db import transaction

        if options.get("deadline") is not None:  # a bad one raises here, not at the commit
            calling.deadline_options(options["deadline"], options.get("deadline_action"))
        transaction.on_commit(functools.partial(self.apply_async, args, kwargs, **options), using=using)

    # -- the canvas (Celery's signatures, see .canvas) ----------------------------------

    def signature(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        """A :class:`~.canvas.Signature` of this call (Celery's ``task.signature(args, kwargs, **options)``)."""
        from .canvas import Signature

        immutable = bool(options.pop("immutable", False))
        return Signature(self, args, kwargs, options, immutable=immutable)

    subtask = signature

    def s(self, *args: Any, **kwargs: Any) -> Any:
        """``task.s(*args, **kwargs)``: a signature; in a chain the previous result goes in front of ``args``."""
        return self.signature(args, kwargs)

    def si(self, *args: Any, **kwargs: Any) -> Any:
        """An immutable signature: it runs with exactly these arguments, even in a chain."""
        return self.signature(args, kwargs, immutable=True)

    def map(self, it: Any) -> Any:
        """One call running this task on each item (``~task.map(items)`` is the list of values)."""
        from .canvas import xmap

        return xmap(self, it)

    def starmap(self, it: Any) -> Any:
        """One call running this task with each item as its args."""
        from .canvas import xstarmap

        return xstarmap(self, it)

    def chunks(self, it: Any, n: int) -> Any:
        """The items in parts of ``n``, each part one call (a group): ``task.chunks(items, 10)()``."""
        from .canvas import chunks

        return chunks(self.s(), it, n)

    def apply(self, args: Any = None, kwargs: Any = None, **options: Any) -> AsyncResult:
        """Run the call in this process now; the result holds its value or its error."""
        return calling.apply(self.job_class, args, kwargs, **options)

    def AsyncResult(self, task_id: str) -> AsyncResult:  # noqa: N802 - Celery's name
        """The result of the call ``task_id`` (``ValueError`` for an id no record can have)."""
        return AsyncResult(task_id, self.name)

    def _instance(self) -> CeleryJob:
        current = running.get()
        if not isinstance(current, self.job_class):
            raise RuntimeError(f"{self.name}.retry()/.request are only available while {self.name} runs")
        return current

    @property
    def request(self) -> Request:
        """The running call of this task (inside it), see :class:`Request`."""
        return self._instance().request

    def retry(self, *args: Any, **kwargs: Any) -> Any:
        """``self.retry()`` of the running call, for tasks without ``bind=True``."""
        return self._instance().retry(*args, **kwargs)

    def update_state(self, *args: Any, **kwargs: Any) -> None:
        return self._instance().update_state(*args, **kwargs)


def _exception_classes(name: str, value: Any) -> tuple[type[BaseException], ...]:
    items = tuple(value) if isinstance(value, (list, tuple)) else (value,)
    for item in items:
        if not (isinstance(item, type) and issubclass(item, BaseException)):
            raise TypeError(f"{name} must be exception classes, not {item!r}")
    return items


def _whole_seconds(name: str, value: Any) -> Any:
    if isinstance(value, dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"{name} must be seconds >= 0 (or a timedelta), not {value!r}")
    return value


def _class_attrs(fn: Callable[..., Any], options: dict[str, Any]) -> dict[str, Any]:
    if options.get("base") is Task:
        options = {k: v for k, v in options.items() if k != "base"}  # every task is one already
    refused = set(options) & set(REFUSED)
    if refused:
        name = sorted(refused)[0]
        raise TypeError(f"@shared_task option {name!r} is not supported: {REFUSED[name]}")
    unknown = set(options) - CELERY_OPTIONS - IGNORED_OPTIONS - JOB_OPTIONS
    if unknown:
        raise TypeError(f"@shared_task got unknown options {sorted(unknown)}; known: {sorted(CELERY_OPTIONS)}, "
                        f"wurk's {sorted(JOB_OPTIONS)}")
    attrs: dict[str, Any] = {"__module__": fn.__module__, "__qualname__": fn.__qualname__, "__doc__": fn.__doc__,
                             "fn": staticmethod(fn)}
    ignored = {name: value for name, value in options.items() if name in IGNORED_OPTIONS}
    if ignored:
        attrs["ignored_options"] = ignored  # readable as task attributes, as on Celery
    for name, value in options.items():
        if name in IGNORED_OPTIONS:
            continue
        if name in ("autoretry_for", "dont_autoretry_for"):
            value = _exception_classes(name, value)
        elif name in ("default_retry_delay", "retry_backoff_max", "result_expires", "soft_time_limit",
                      "time_limit") and value is not None:
            value = _whole_seconds(name, value)
        elif name == "max_retries" and value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                                              or value < 0):
            raise ValueError(f"max_retries must be an integer >= 0 or None, not {value!r}")
        elif name == "retry_kwargs" and not isinstance(value, dict):
            raise TypeError(f"retry_kwargs must be a dict, not {value!r}")
        elif name == "rate_limit":
            rate_limits.parse(value)  # a rate wurk cannot keep fails at the decorator
        attrs[name] = value
    if "<locals>" not in fn.__qualname__:
        attrs.setdefault("name", f"{fn.__module__}.{fn.__qualname__}")  # Celery's default: self.name reads it
    limits = {k: attrs.pop(k) for k in ("soft_time_limit", "time_limit") if attrs.get(k) is not None}
    if limits:
        # Payload keys the worker's time limits read (seconds), pushed with every call.
        attrs["job_options"] = {**limits, **(attrs.get("job_options") or {})}
    return attrs


def shared_task(*args: Any, **options: Any) -> Any:
    """Make a function a task: ``@shared_task`` or ``@shared_task(bind=True, queue="mail", ...)``.

    Celery's options: ``name``, ``queue``, ``bind``, ``max_retries`` (3),
    ``default_retry_delay`` (180 s), ``autoretry_for``, ``dont_autoretry_for``,
    ``retry_kwargs``, ``retry_backoff``, ``retry_backoff_max`` (600 s), ``retry_jitter``,
    ``ignore_result``, ``result_expires`` (1 day), ``soft_time_limit``, ``time_limit``,
    ``expires``, ``typing``; wurk's job options (``tags``, ``retry_queue``, ``dead``,
    ``unique_for``...) too. See docs/from-celery.md for what each becomes.
    """

    def wrap(fn: Callable[..., Any]) -> Task:
        attrs = _class_attrs(fn, options)
        return Task(fn, type(fn.__name__, (CeleryJob,), attrs))

    if len(args) == 1 and callable(args[0]) and not options:
        return wrap(args[0])
    if args:
        raise TypeError("use @shared_task or @shared_task(option=...), with keyword options")
    return wrap


#: ``@app.task`` becomes ``@task``: the same decorator (there is no app object).
task = shared_task
