"""The job at hand: what a worker knows about the job a thread is running.

The processor builds one :class:`JobContext` per job and makes it current for
as long as the job runs and its outcome is settled. Everything the engine and
the features do for that job reads it from here: the worker's own
:class:`~wurk_django.conf.Config` (with the command line's ``-q``/``-c`` and
``--shard``), the Redis client of the server the job was fetched from, the
bytes as fetched, the parsed job and, at the end, how the run ended (an
:class:`~wurk_django.outcome.Outcome`).

The server middleware signature stays Sidekiq's ``mw(instance, job, queue,
call_next)``; built-in middleware, death handlers, batch callbacks and job
classes call :func:`current` instead of reading the settings, so a worker
started with ``--shard eu`` keeps every key of a job's features on ``eu``.

Which Redis a call uses, everywhere (pushes, ``Client()``, ``AsyncResult``, the
data API, batches, workflows, the dashboard) is one rule, :func:`config` /
:func:`redis`, first match wins:

1. the call's explicit argument (a ``config=`` or ``redis=`` it was given);
2. the shard of the enclosing ``via()`` block;
3. the running job's config: a worker started with ``--shard eu`` keeps what
   its jobs push and read on ``eu``;
4. the settings.

This module is the only place that falls back on the settings; the layout test
(tests/test_context_layout.py) keeps every other module from doing it itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar, Token
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import redis as redis_lib

    from .conf import Config


class JobContext:
    """One job's run. ``outcome`` and ``error`` are filled in as the run ends.

    Outside a worker (inline runs, a death decided by the dashboard) a context
    carries only ``config`` and ``redis``; the other fields are ``None``.
    """

    __slots__ = ("config", "redis", "raw", "unit", "queue", "job", "instance", "job_class", "outcome",
                 "error", "value")

    def __init__(self, config: Config, redis: redis_lib.Redis, raw: bytes | str | None = None, unit: Any = None,
                 queue: str | None = None, job: dict | None = None) -> None:
        self.config = config
        self.redis = redis
        self.raw = raw  # the bytes as fetched: what a retry, a re-push or the dead set starts from
        self.unit = unit  # the fetcher's unit of work (acknowledge / requeue)
        self.queue = queue
        self.job = job
        self.instance: Any = None
        self.job_class: Any = None
        self.outcome: Any = None  # an Outcome once a feature or the engine decided how the run ends
        self.error: BaseException | None = None  # the job's failure, when it failed
        self.value: Any = None  # what ``perform`` returned (a tracked job's record keeps it)

    def __repr__(self) -> str:
        jid = self.job.get("jid") if isinstance(self.job, dict) else None
        return f"<JobContext jid={jid} queue={self.queue} outcome={self.outcome}>"


_current: ContextVar[JobContext | None] = ContextVar("wurk_job_context", default=None)


def enter(ctx: JobContext) -> Token:
    """Make ``ctx`` current; give the token to :func:`leave` when the job is settled."""
    return _current.set(ctx)


def leave(token: Token) -> None:
    _current.reset(token)


@contextmanager
def scope(ctx: JobContext) -> Iterator[JobContext]:
    """``ctx`` is current inside the block: for running a job outside a processor
    (``perform_inline``, the testing helpers, tests of a middleware)."""
    token = _current.set(ctx)
    try:
        yield ctx
    finally:
        _current.reset(token)


def running() -> JobContext | None:
    """The context of the job this thread (or task) runs, or ``None`` outside a job."""
    return _current.get()


def current() -> JobContext:
    """The running job's context; outside a job (``perform_inline``, the testing
    modes, a script) a context for :func:`config` and its Redis."""
    ctx = _current.get()
    if ctx is not None:
        return ctx
    here = config()
    return JobContext(here, redis_for(here))


def config(explicit: Config | None = None) -> Config:
    """The config a call uses here: ``explicit`` when given, else the enclosing
    ``via()`` block's shard, else the running job's config, else the settings'."""
    if explicit is not None:
        return explicit
    if _settings is None:
        _load_settings()
    shard = _via.get()
    ctx = _current.get()
    # Inside a job, via() still points at another shard, keeping the worker's overrides.
    home = _settings() if ctx is None else ctx.config
    return home if shard is None else home.for_shard(shard)


_settings: Any = None  # conf.base_config, looked up once: this runs on every push
_via: Any = None


def _load_settings() -> None:
    # Lazy: conf imports the Redis layer, which imports this module.
    global _settings, _via
    from .conf import VIA, base_config

    _via, _settings = VIA, base_config


def redis(explicit: redis_lib.Redis | None = None, *, config: Config | None = None) -> redis_lib.Redis:
    """The Redis client a call uses here: ``explicit`` when given, else the client
    for :func:`config` (of ``config`` when given): the running job's own client
    when that is the job's config."""
    if explicit is not None:
        return explicit
    return redis_for(globals()["config"](config))


def redis_for(config: Config) -> redis_lib.Redis:
    """The main client for ``config``: the running job's own when it is the job's config."""
    ctx = _current.get()
    if ctx is not None and ctx.config is config:
        return ctx.redis
    from .redis.connection import client_for

    return client_for(config)


def layout_redis(explicit: Any = None, *, config: Config | None = None) -> Any:
    """The client for a step whose keys go through a layout
    (:func:`wurk_django.redis.cluster_layout.layout_of`): :func:`redis`'s, except that on a
    Redis Cluster it is the process's ``RedisCluster`` (issue 46 item 3: unique locks, batches,
    pauses, result records), where :func:`redis` refuses the cluster for the steps not
    converted yet. Outside a cluster it is exactly :func:`redis`'s client."""
    if explicit is not None:
        return explicit
    here = globals()["config"](config)
    ctx = _current.get()
    if ctx is not None and ctx.config is here:
        return ctx.redis
    from .redis.connection import cluster_for

    clustered = cluster_for(here)
    return clustered if clustered is not None else redis_for(here)
