"""Defining jobs: the :class:`Job` base class and the :func:`job` decorator.

::

    class SendEmail(Job):
        queue = "mail"
        retry = 5

        def perform(self, user_id, template):
            ...

    SendEmail.perform_async(42, "welcome")
    SendEmail.set(queue="critical").perform_in(60, 42, "welcome")

Options are class attributes (``queue``, ``retry``, ``retry_for``,
``backtrace``, ``dead``, ``tags``, ``retry_queue``, ``name``, ``unique_for``,
``unique_until``, ``encrypt``, ``soft_time_limit``, ``time_limit``), plus any extra
payload keys in ``job_options``. Unset options fall back to
``WURK["DEFAULT_JOB_OPTIONS"]``.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from . import context, payload, policies, registry, time_limits
from .asyncrun import run_coroutine
from .conf import VIA
from .middleware import server_chain as build_server_chain

if TYPE_CHECKING:
    from .conf import Config

#: Class attributes copied into the payload when set.
OPTION_NAMES = ("queue", "retry", "retry_for", "backtrace", "dead", "tags", "retry_queue", "log_level",
                "display_class", "expires_in", "unique_for", "unique_until", "encrypt", "soft_time_limit",
                "time_limit", "debounce_for", "debounce_max_wait", "throttle_for", "track")
_ABSOLUTE_THRESHOLD = 1_000_000_000  # below this an interval is relative, above it an epoch time (CORE-086)
_client_class: Any = None  # wurk_django.client.push.Client, once imported (see Setter._client)


def _run_at(when: Any) -> float:
    """Epoch seconds for ``perform_in``/``perform_at`` input (CORE-086)."""
    if isinstance(when, dt.timedelta):
        return time.time() + when.total_seconds()
    if isinstance(when, dt.datetime):
        if when.tzinfo is None:
            from django.utils import timezone

            when = timezone.make_aware(when, timezone.get_default_timezone())
        return when.timestamp()
    if isinstance(when, bool) or not isinstance(when, (int, float)):
        raise ValueError(f"a run time must be seconds, a timedelta or a datetime, not {when!r}")
    seconds = float(when)
    if not math.isfinite(seconds):
        # inf would be scheduled forever and never run; nan compares false and would run at once.
        raise ValueError(f"a run time must be a finite number of seconds, not {when!r}")
    return time.time() + seconds if seconds < _ABSOLUTE_THRESHOLD else seconds


class Setter:
    """Options for one push: ``SendEmail.set(queue="low").perform_async(...)`` (CORE-087)."""

    def __init__(self, job_class: type[Job], options: dict[str, Any], companions: Any = None) -> None:
        self.job_class = job_class
        self.options = dict(options)
        #: What a feature pushes beside each job (a :class:`~wurk_django.client.planning.Companions`).
        self.companions = companions
        wait = self.options.pop("wait", None)
        wait_until = self.options.pop("wait_until", None)
        if wait is not None or wait_until is not None:
            self.options["at"] = _run_at(wait if wait is not None else wait_until)

    def set(self, **options: Any) -> Setter:
        return Setter(self.job_class, {**self.options, **options}, self.companions)

    def _client(self, config: Config | None = None):
        # Lazy: client.py imports Job (a push accepts Job classes), so the push path is
        # reached at call time, once (an import statement per push costs a lookup in
        # the import machinery); the circle goes once client.py stops importing job.py.
        global _client_class
        if _client_class is None:
            from .client.push import Client

            _client_class = Client
        return _client_class(config=config)

    def _item(self, args: tuple, kwargs: dict[str, Any] | None = None) -> dict:
        item = {**self.options, "class": self.job_class, "args": list(args)}
        if kwargs:
            # Keyword arguments travel beside ``args`` (the project's wire contract), so a
            # Ruby reader still sees the positional ones where it expects them.
            item["kwargs"] = {**item.get("kwargs", {}), **kwargs}
        return item

    def perform_async(self, *args: Any, **kwargs: Any) -> str | None:
        """Push the job to run as soon as a worker is free; returns its jid.

        Keyword arguments reach ``perform`` as keyword arguments (the payload's ``kwargs``)."""
        if self.options.get("sync") is True:
            self.perform_inline(*args, **kwargs)
            return self.options.get("jid")
        item = self._item(args, kwargs)
        at = item.get("at")
        if at is not None and float(at) <= time.time():
            item.pop("at")
        return self._push(item)

    def perform_async_on_commit(self, *args: Any, **kwargs: Any) -> str | None:
        """``perform_async`` once the current database transaction commits (nothing on
        rollback; at once outside a transaction): ``set(on_commit=True).perform_async``."""
        return self.set(on_commit=True).perform_async(*args, **kwargs)

    def _push(self, item: dict) -> str | None:
        config = context.config()  # once per push: the client and its pool reuse it
        on_commit = item.pop("on_commit", None)
        if on_commit is None:
            on_commit = config.enqueue_on_commit
        shard = VIA.get()
        if shard is not None and "shard" not in item:
            # The client gets a config, which beats via(); and a push at commit may happen
            # outside this via() block: name the block's shard on the push itself.
            item["shard"] = shard
        if on_commit:
            from .client.transaction import push_on_commit  # lazy: transaction.py imports client.py, see _client

            return push_on_commit(self._client(config), item, using=on_commit if isinstance(on_commit, str) else None,
                                  **({} if self.companions is None else {"companions": self.companions}))
        if self.companions is None:
            return self._client(config).push(item)
        return self._client(config).push(item, self.companions)

    def perform_in(self, interval: float | dt.timedelta | dt.datetime, *args: Any, **kwargs: Any) -> str | None:
        """Run after ``interval`` seconds (or a timedelta); a past time runs now."""
        at = _run_at(interval)
        item = self._item(args, kwargs)
        if at > time.time():
            item["at"] = at
        else:
            item.pop("at", None)
        return self._push(item)

    perform_at = perform_in

    def perform_bulk(self, args_list: list[list[Any]], *, batch_size: int | None = None,
                     at: Any = None, spread_interval: float | None = None) -> list[str | None]:
        """Push one job per argument list, ``batch_size`` per round trip (CORE-089).

        ``batch_size`` defaults to 1000, or 100 when the jobs are scheduled.
        ``at`` follows ``perform_at``'s rules (relative seconds, epoch, datetime);
        a list gives each job its own time. With ``set(on_commit=True)`` (or
        ``ENQUEUE_ON_COMMIT``) inside a transaction, the jids come back at once
        and the jobs are pushed when it commits.
        """
        item: dict[str, Any] = {**self.options, "class": self.job_class, "args": args_list}
        if batch_size is not None:
            item["batch_size"] = batch_size
        item.pop("at", None)
        if at is not None:
            item["at"] = [_run_at(a) for a in at] if isinstance(at, list) else _run_at(at)
        if spread_interval is not None:
            item["spread_interval"] = spread_interval
        config = context.config()
        on_commit = item.pop("on_commit", None)
        if on_commit is None:
            on_commit = config.enqueue_on_commit
        if "shard" not in item and VIA.get() is not None:
            item["shard"] = VIA.get()  # as in _push: the client's config beats via(), a commit may come later
        if on_commit:
            from .client.transaction import push_bulk_on_commit  # lazy: see _push

            return push_bulk_on_commit(self._client(config), item,
                                       using=on_commit if isinstance(on_commit, str) else None)
        return self._client(config).push_bulk(item)

    def perform_inline(self, *args: Any, **kwargs: Any) -> bool | None:
        """Run the job now, in this thread, through both middleware chains, without Redis."""
        config = context.config()
        item = self._item(args, kwargs)
        item.pop("at", None)
        # Through the push door, as a push (no connection: nothing reaches Redis).
        planned = self._client(config).plan(item, in_process=True)
        if planned is None:
            return None
        job = payload.loads(planned.raw())
        instance = self.job_class()
        instance.jid = job["jid"]
        instance.bid = job.get("bid")
        instance.payload = job
        server_chain = build_server_chain(config)
        def perform() -> bool:
            instance.run(job["args"], job.get("kwargs"))
            return True

        # The job's context, as a worker makes it: the features in the chain read it.
        where = context.JobContext(config, context.redis_for(config), payload.dumps(job), queue=job["queue"],
                                   job=job)
        where.instance, where.job_class = instance, self.job_class
        with context.scope(where):
            # A server middleware that does not call through halts the job: report it like the client side does.
            if not server_chain.invoke((instance, job, job["queue"]), perform):
                return None
        return True


class Job:
    """Base class of a job: subclass it and define ``perform(self, *args)``."""

    #: Registry name pushed as the payload's ``class``; default: ``module.QualName``.
    name: ClassVar[str | None] = None
    queue: ClassVar[str | None] = None
    retry: ClassVar[bool | int | None] = None
    retry_for: ClassVar[int | None] = None
    backtrace: ClassVar[bool | int | None] = None
    dead: ClassVar[bool | None] = None
    tags: ClassVar[list[str] | None] = None
    retry_queue: ClassVar[str | None] = None
    log_level: ClassVar[str | None] = None
    display_class: ClassVar[str | None] = None
    #: Seconds (or a timedelta) after creation past which the job is skipped, not run (PRO-310).
    expires_in: ClassVar[float | None] = None
    #: Seconds (or a timedelta) a unique job's lock may live; needs ``WURK["UNIQUE_JOBS"]`` (ENT-202).
    unique_for: ClassVar[int | float | dt.timedelta | None] = None
    #: When a unique job's lock is released: ``"success"`` (default) or ``"start"``.
    unique_until: ClassVar[str | None] = None
    #: Encrypt the last positional argument (AES-256-GCM); needs ``WURK["ENCRYPTION"]`` (ENT-603).
    encrypt: ClassVar[bool | None] = None
    #: Seconds (at most a day) after which SoftTimeLimitExceeded is raised inside the running job
    #: (docs/time-limits.md).
    soft_time_limit: ClassVar[float | dt.timedelta | None] = None
    #: Seconds (at most a day) after which the job's thread is abandoned and the job booked as failed
    #: (docs/time-limits.md).
    time_limit: ClassVar[float | dt.timedelta | None] = None
    #: Debounce (issue 47 item 3): a burst of pushes becomes one job, with the last push's
    #: arguments, run this many seconds after the last push (docs/jobs.md#debounce-and-throttle).
    debounce_for: ClassVar[float | dt.timedelta | None] = None
    #: A debounced burst runs at the latest this many seconds after its first push (default: 10 x debounce_for).
    debounce_max_wait: ClassVar[float | dt.timedelta | None] = None
    #: Throttle (issue 47 item 3): one push admitted per slot of this many seconds; the others are dropped.
    throttle_for: ClassVar[float | dt.timedelta | None] = None
    #: Keep a status record of each job (state, progress, result, error, timings), readable with
    #: ``wurk_django.status.get(jid)``: ``True`` (kept ``WURK["TRACK_TTL"]`` seconds after each
    #: change) or the seconds to keep it (issue 47 item 2, docs/status.md).
    track: ClassVar[bool | int | dt.timedelta | None] = None
    #: Extra payload keys to push with every job of this class (a dict; see get_options).
    job_options: ClassVar[dict[str, Any] | None] = None
    #: The Redis shard (a name in ``WURK["SHARDS"]``) this class's jobs are pushed to;
    #: never stored in the job (see wurk_django.redis.shards).
    shard: ClassVar[str | None] = None

    #: ``retry_in(count, exc, job)`` -> seconds, "discard", "kill" or None (CORE-123).
    retry_in: ClassVar[Callable[..., Any] | None] = None
    #: ``retries_exhausted(job, exc)`` -> None or "discard" (CORE-126).
    retries_exhausted: ClassVar[Callable[..., Any] | None] = None

    job_name: ClassVar[str]

    jid: str | None = None
    bid: str | None = None
    payload: dict | None = None
    _stop_flag: Any = None
    #: The worker's :class:`Config` while a worker runs the job (None inline: settings apply).
    _config: Config | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        dotted = f"{cls.__module__}.{cls.__qualname__}"
        own_name = cls.__dict__.get("name")
        cls.job_name = own_name or dotted
        if "<locals>" in dotted and not own_name:
            return  # a class made inside a function can only be pushed by its explicit name
        extra = cls.__dict__.get("job_options")
        if extra is not None and not isinstance(extra, dict):
            raise TypeError(f"{dotted}.job_options must be a dict, not {extra!r}")
        for limit in time_limits.NAMES:
            value = cls.__dict__.get(limit)
            value = value.total_seconds() if hasattr(value, "total_seconds") else value
            reason = time_limits.problem(limit, value)
            if reason:
                raise TypeError(f"{dotted}: {reason}")
        policies.check_class(dotted, cls)
        if cls.__dict__.get("track") is not None:
            _check_track(dotted, cls.__dict__["track"])
        registry.register(cls, dotted, own_name or "")

    @classmethod
    def get_options(cls) -> dict[str, Any]:
        """The payload options this class pushes with."""
        options: dict[str, Any] = {}
        for klass in reversed(cls.__mro__):
            extra = klass.__dict__.get("job_options")
            if isinstance(extra, dict):
                options.update(extra)
        for name in OPTION_NAMES:
            value = getattr(cls, name)
            if value is not None:
                options[name] = value
        return options

    def perform(self, *args: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} must define perform(self, *args)")

    def run(self, args: list, kwargs: dict[str, Any] | None = None) -> Any:
        """Call ``perform`` with the payload's ``args`` (and ``kwargs``, when it has them);
        coroutine results run on this thread's event loop."""
        result = self.perform(*args, **kwargs) if kwargs else self.perform(*args)
        if hasattr(result, "__await__"):
            result = run_coroutine(result)
        return result

    @property
    def batch(self) -> Any:
        """The batch this job belongs to, reopened (``None`` outside a batch): inside a
        job, ``with self.batch.jobs(): ...`` adds more jobs to it."""
        if not self.bid:
            return None
        from .batch import Batch

        return Batch(self.bid)

    def valid_within_batch(self) -> bool:
        """False once this job's batch was invalidated (a long job may stop early)."""
        if not self.bid:
            return True
        from .redis.cluster_layout import layout_of

        redis = context.layout_redis()  # on a Redis Cluster its {b:<bid>} hash (issue 46 item 3)
        return redis.hget(layout_of(redis).batch(self.bid), "invalidated") != b"1"

    def progress(self, percent: float, message: str | None = None) -> bool:
        """Report how far this run is (``percent``, 0 to 100) and what it does now, in the
        job's status record (a tracked class, a Celery-style or ``django.tasks`` task): one
        Redis command, read back with ``wurk_django.status.get(jid)`` and on the admin's
        Busy page. A job that keeps no record writes nothing; a Redis error is logged,
        never raised (False). See docs/status.md."""
        from .results import record  # on the first report only

        return record.report_progress(percent, message, jid=self.jid)

    def interrupted(self) -> bool:
        """True once this job's worker is stopping; long jobs should save and return."""
        flag = self._stop_flag
        return bool(flag is not None and flag.is_set())

    # Class-level push API, delegating to a Setter with no extra options.
    @classmethod
    def set(cls, **options: Any) -> Setter:
        return Setter(cls, options)

    @classmethod
    def perform_async(cls, *args: Any, **kwargs: Any) -> str | None:
        return Setter(cls, {}).perform_async(*args, **kwargs)

    @classmethod
    def perform_async_on_commit(cls, *args: Any, **kwargs: Any) -> str | None:
        return Setter(cls, {}).perform_async_on_commit(*args, **kwargs)

    @classmethod
    def perform_in(cls, interval: float | dt.timedelta | dt.datetime, *args: Any, **kwargs: Any) -> str | None:
        return Setter(cls, {}).perform_in(interval, *args, **kwargs)

    @classmethod
    def perform_at(cls, when: float | dt.datetime, *args: Any, **kwargs: Any) -> str | None:
        return Setter(cls, {}).perform_at(when, *args, **kwargs)

    @classmethod
    def perform_bulk(cls, args_list: list[list[Any]], **kwargs: Any) -> list[str | None]:
        return Setter(cls, {}).perform_bulk(args_list, **kwargs)

    @classmethod
    def perform_inline(cls, *args: Any, **kwargs: Any) -> bool | None:
        return Setter(cls, {}).perform_inline(*args, **kwargs)

    # Signatures: a call written down for a workflow (wurk_django.workflow), not pushed.
    @classmethod
    def s(cls, *args: Any, **kwargs: Any) -> Any:
        """A :class:`~wurk_django.workflow.Signature` of this job; in a workflow the
        results of the steps it waits for are put in front of ``args``."""
        from .workflow.signature import Signature

        return Signature(cls, args, kwargs)

    @classmethod
    def si(cls, *args: Any, **kwargs: Any) -> Any:
        """An immutable signature: it runs with exactly these arguments."""
        from .workflow.signature import Signature

        return Signature(cls, args, kwargs, immutable=True)


def _check_track(dotted: str, value: Any) -> None:
    from .results import tracking  # only for a class that sets track

    reason = tracking.problem(value)
    if reason:
        raise TypeError(f"{dotted}: {reason}")


class JobFunction:
    """What ``@job`` returns: the function itself, plus the push methods."""

    def __init__(self, fn: Callable[..., Any], job_class: type[Job]) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.job_class = job_class

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("perform_") or name in ("set", "job_name", "get_options", "s", "si"):
            return getattr(self.job_class, name)
        raise AttributeError(name)


def job(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Make a plain function a job: ``@job`` or ``@job(queue="mail", retry=3)``."""

    def wrap(fn: Callable[..., Any]) -> JobFunction:
        unknown = set(options) - set(OPTION_NAMES) - {"name", "job_options", "retry_in", "retries_exhausted", "shard"}
        if unknown:
            raise TypeError(f"@job got unknown options {sorted(unknown)}; known: {sorted(OPTION_NAMES)}")
        attrs: dict[str, Any] = {
            "__module__": fn.__module__,
            "__qualname__": fn.__qualname__,
            "__doc__": fn.__doc__,
            "perform": lambda self, *args, **kwargs: fn(*args, **kwargs),
        }
        for hook in ("retry_in", "retries_exhausted"):
            if hook in options:
                attrs[hook] = staticmethod(options.pop(hook))
        attrs.update(options)
        job_class = type(fn.__name__, (Job,), attrs)
        return JobFunction(fn, job_class)

    return wrap(fn) if fn is not None else wrap
