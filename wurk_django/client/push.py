"""Pushing jobs into Redis (CORE-080..089): the one push door.

Every push is planned by :meth:`Client.plan` (see :mod:`wurk_django.client.planning`):
validate and normalize the job dict, run the client middleware, check the
arguments. :meth:`Client.push` then writes the planned job in one round trip:
``LPUSH`` onto ``queue:<name>`` for immediate jobs, ``ZADD schedule`` when the job
carries an ``at``. The other writers plan through the same door: ``aenqueue``
(:meth:`Client.awrite`), a push deferred to a commit (prepared at the call site,
finished at the commit), ``perform_inline``, a batch's callbacks and a workflow's
steps (planned before a script moves their bytes).
"""

from __future__ import annotations

import logging
import math
import random
import time
from typing import Any

import redis as redis_lib

from .. import context, payload, registry, signals, testing, time_limits
from .. import deadline as deadlines
from ..conf import QUEUE_NAME_RULE, Config, is_queue_name
from ..job import Job
from ..middleware import Chain, client_chain
from ..redis import connection, shards
from .arguments import check_arguments, check_keyword_arguments
from .planning import NONE, Companions, Planned, Prepared
from .writer import AsyncWriter, Writer

logger = logging.getLogger("wurk_django.client.push")

# Accepted from callers but never written to Redis (CORE-038).
TRANSIENT_KEYS = ("pool", "client_class", "wait", "wait_until", "sync", "on_commit", "shard")
RETRY_FOR_MAX = 1_000_000_000


def _job_class_of(klass: Any):
    if isinstance(klass, type) and issubclass(klass, Job):
        return klass
    job_class = getattr(klass, "job_class", None)  # a @job-decorated function
    if isinstance(job_class, type) and issubclass(job_class, Job):
        return job_class
    return None


def validate(item: Any) -> None:
    """Raise ``ValueError`` naming what is wrong with a job dict (CORE-080)."""
    if not isinstance(item, dict):
        raise ValueError(f"a job must be a dict, not {type(item).__name__}: {item!r}")
    for key in item:
        if not isinstance(key, str):
            raise ValueError(f"job keys must be strings; {key!r} is a {type(key).__name__}")
    if "class" not in item or "args" not in item:
        raise ValueError(f"a job needs 'class' and 'args': {item!r}")
    if not isinstance(item["args"], list):
        raise ValueError(f"job args must be a list, not {type(item['args']).__name__}: {item['args']!r}")
    if "kwargs" in item:
        _validate_kwargs(item["kwargs"])
    klass = item["class"]
    if not isinstance(klass, str) and _job_class_of(klass) is None:
        raise ValueError(f"job 'class' must be a Job subclass or a string, not {klass!r}")
    if isinstance(klass, str) and (not klass or "|" in klass):
        raise ValueError(f"job class name {klass!r} must be non-empty and free of '|'")
    if "at" in item and not _finite(item["at"]):
        raise ValueError(f"job 'at' must be a finite number of epoch seconds, not {item['at']!r}")
    if "tags" in item and not isinstance(item["tags"], list):
        raise ValueError(f"job 'tags' must be a list, not {item['tags']!r}")
    retry_for = item.get("retry_for")
    if retry_for is not None and (
        isinstance(retry_for, bool) or not isinstance(retry_for, (int, float)) or retry_for > RETRY_FOR_MAX
    ):
        raise ValueError(f"job 'retry_for' must be seconds <= {RETRY_FOR_MAX}, not {retry_for!r}")


def _validate_kwargs(kwargs: Any) -> None:
    # The wire contract: keyword arguments are one JSON object beside ``args``, its keys
    # the parameter names ``perform`` is called with.
    if not isinstance(kwargs, dict):
        raise ValueError(f"job kwargs must be a dict of keyword arguments, not {type(kwargs).__name__}: {kwargs!r:.200}")
    for name in kwargs:
        if type(name) is not str:
            raise ValueError(f"job kwargs keys must be strings (parameter names); {name!r} is a {type(name).__name__}")


def check_kwargs(job: dict, config: Config, name: str | None = None) -> None:
    """Apply ``ON_COMPLEX_ARGUMENTS`` to the job's ``kwargs`` in place; an empty ``kwargs``
    is left out, so a job without keyword arguments is the plain Sidekiq payload."""
    if "kwargs" not in job:
        return
    if not job["kwargs"]:
        del job["kwargs"]
        return
    _validate_kwargs(job["kwargs"])
    job["kwargs"] = check_keyword_arguments(name or job["class"], job["kwargs"], config.on_complex_arguments)


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_options(job: dict) -> None:
    """Refuse option values the worker would refuse (same rules), naming the bad one (CORE-080).
    (``encrypt`` without a key is refused by the encryption middleware.)"""
    queue = job.get("queue")
    if not is_queue_name(queue):
        raise ValueError(f"job {job.get('class')} has queue {queue!r}; a queue name must be {QUEUE_NAME_RULE}")
    if job.get("retry_queue") is not None and not is_queue_name(job["retry_queue"]):
        raise ValueError(f"'retry_queue' {job['retry_queue']!r} must be {QUEUE_NAME_RULE}")
    problem = payload.field_problem({k: v for k, v in job.items() if k != "jid" or v is not None})
    if problem:
        raise ValueError(problem.replace("payload ", "job option ", 1))
    backtrace = job.get("backtrace")
    if backtrace is not None and not isinstance(backtrace, (bool, int)):
        raise ValueError(f"job option 'backtrace' must be true, false or a line count, not {backtrace!r}")
    if job.get("dead") is not None and not isinstance(job["dead"], bool):
        raise ValueError(f"job option 'dead' must be true or false, not {job['dead']!r}")
    tags = job.get("tags")
    if tags is not None and (not isinstance(tags, list) or not all(type(t) is str for t in tags)):
        raise ValueError(f"job 'tags' must be a list of strings, not {tags!r}")
    if "at" in job and not _finite(job["at"]):
        raise ValueError(f"job 'at' must be a finite number of epoch seconds, not {job['at']!r}")


def normalize(item: dict, config: Config) -> dict:
    """Overlay class options with the item and fill jid/created_at (CORE-081)."""
    return _fill(_template(item, config))


def _template(item: dict, config: Config) -> dict:
    """Everything of a normalized job that does not differ between the jobs of one bulk push."""
    klass = item["class"]
    job_class = _job_class_of(klass)
    if job_class is None:
        job_class = registry.registered().get(klass)
    options = job_class.get_options() if job_class is not None else {}
    plain = len(item) == 2 and job_class is not None and klass is not None and not isinstance(klass, str)
    if plain:
        # A push with no options of its own (``perform_async``): the same template as the
        # last such push of this class and config, unless the class's options changed
        # (they are read every time: a test may patch them). The checks below ran on it.
        cache = config.memo.get("templates")
        if cache is None:
            cache = config.memo["templates"] = {}
        known = cache.get(job_class)
        if known is not None and known[0] == options:
            job = known[1].copy()
            job["args"] = item["args"]
            job["created_at"] = config.wire_format.now()
            return job
    job = {**config.default_job_options, **options, **item}
    job["class"] = job_class.job_name if job_class is not None and not isinstance(klass, str) else str(klass)
    for key in TRANSIENT_KEYS:
        job.pop(key, None)
    queue = job.get("queue")
    if queue is None or queue == "":
        raise ValueError(f"job {job['class']} has an empty queue name")
    if not job.get("jid"):
        job["jid"] = None  # filled per job by _fill; placed here so the key order is Sidekiq's
    if job.get("retry_for") is not None:
        job["retry_for"] = int(job["retry_for"])
    if "created_at" in job or job["jid"] is not None:
        plain = False  # given by the options: a template must not hand them to every push
    if "created_at" not in job:
        job["created_at"] = config.wire_format.now()
    expires_in = job.get("expires_in")
    if expires_in is not None and "expiry" not in job:
        # PRO-310: the clock starts at creation, so a scheduled job's delay counts too.
        seconds = expires_in.total_seconds() if hasattr(expires_in, "total_seconds") else expires_in
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds <= 0:
            raise ValueError(f"'expires_in' must be seconds > 0 or a timedelta, not {expires_in!r}")
        job["expires_in"] = seconds
        job["expiry"] = payload.epoch_seconds(job["created_at"]) + seconds
        plain = False  # its expiry counts from each job's own creation
    time_limits.normalize(job)
    if "deadline" in job or "deadline_action" in job:
        deadlines.normalize(job)  # issue 47 item 5: epoch seconds, and never before its run time
    if "track" in job:
        from ..results import tracking  # a tracked job only: other pushes import nothing more

        tracking.normalize(job, config.track_ttl)  # issue 47 item 2: the seconds its status is kept
    check_options(job)
    if plain:
        cache[job_class] = (options, job.copy())
    return job


def _fill(job: dict) -> dict:
    if not job["jid"]:
        job["jid"] = payload.new_jid()
    return job


class Client:
    """Pushes jobs. Cheap to build; uses the process-wide Redis pool unless given one."""

    def __init__(self, redis: redis_lib.Redis | None = None, config: Config | None = None,
                 middleware: Chain | None = None) -> None:
        self.config = context.config(config)
        self._redis = redis
        self._follows_via = config is None  # a config handed in beats via(), as an explicit redis does
        # The config's shared chain unless given one; ``middleware`` hands out a copy of
        # it (a caller may change that one: the shared chain must stay as it is).
        self._chain = middleware if middleware is not None else client_chain(self.config)
        self._own_chain = middleware is not None

    @property
    def middleware(self) -> Chain:
        """This client's middleware chain (its own: changing it changes no other client)."""
        if not self._own_chain:
            self._chain, self._own_chain = self._chain.copy(), True
        return self._chain

    @middleware.setter
    def middleware(self, chain: Chain) -> None:
        self._chain, self._own_chain = chain, True

    @property
    def redis(self) -> redis_lib.Redis:
        return self._redis or connection.client_for(self.config)

    @staticmethod
    def reliable_push(*, buffer: int | None = None, overflow: str | None = None) -> None:
        """Keep pushes through Redis outages, in this whole process (Sidekiq Pro's
        ``Client.reliable_push!``). Every ``push``/``push_bulk`` (``perform_async`` and
        friends included) that meets a connection error or timeout leaves its jobs in
        an in-memory buffer that a background thread delivers, oldest first, once Redis
        answers; later pushes deliver the backlog first. Jobs of a batch are never
        buffered (their push raises).

        Buffering is already on unless ``WURK["RELIABLE_PUSH"]`` is ``False``; this call
        turns it on whatever the setting says. ``buffer`` caps the jobs held (default
        ``RELIABLE_PUSH_BUFFER``, 1000); ``overflow`` says what a full buffer does:
        ``"raise"`` (:class:`~wurk_django.client.reliable_push.PushBufferFull` at the call
        site) or ``"drop_oldest"`` (a ring: the oldest buffered jobs go, each logged by
        jid at ERROR); default ``RELIABLE_PUSH_OVERFLOW``. Call it once where the
        process starts (an ``AppConfig.ready()``, a script's top); calling it again with
        the same values changes nothing. Bad values raise ``ValueError``. Tests need
        not call it: ``TESTING = "fake"`` or ``"inline"`` never reaches Redis.
        """
        from . import reliable_push

        reliable_push.install(buffer=buffer, overflow=overflow)

    # -- the door ------------------------------------------------------------------

    def prepare(self, item: dict, companions: Companions = NONE) -> Prepared:
        """The first half of :meth:`plan`: validate ``item``, pick its Redis and normalize it
        (class options, jid, ``created_at``, option checks). No I/O: a push deferred to a
        commit is prepared at the call site, so a bad option raises there."""
        validate(item)
        target = self._route(item)
        job = normalize(item, self.config)
        return Prepared(job, target or self._route_queue(item, job["queue"]), companions)

    def check(self, prepared: Prepared) -> None:
        """Apply the argument check :meth:`finish` applies, now (a deferred push's call site),
        so the caller gets the error an immediate push would raise. An encrypted job's
        last argument is left to the encryption middleware, which never quotes it."""
        job, mode = prepared.job, self.config.on_complex_arguments
        if payload.truthy(job.get("encrypt")) and job["args"]:
            job["args"] = [*check_arguments(job["class"], job["args"][:-1], mode), job["args"][-1]]
        else:
            job["args"] = check_arguments(job["class"], job["args"], mode)
        check_kwargs(job, self.config)

    def middleware_applies(self, prepared: Prepared) -> bool:
        """Whether any client middleware has business with this job (an ``async`` caller then
        runs :meth:`finish` in a thread: a middleware may do blocking I/O)."""
        return self._chain.applies_to(prepared.job)

    def finish(self, prepared: Prepared, *, in_process: bool = False) -> Planned | None:
        """The second half of :meth:`plan`: the client middleware, then the argument check;
        ``None`` when a middleware stopped the push. ``in_process``: nothing will reach
        Redis (``perform_inline``), so the middleware is given no connection."""
        job = self._through_middleware(prepared.job, prepared.target, in_process=in_process)
        if not job:
            return None
        job["args"] = check_arguments(job["class"], job["args"], self.config.on_complex_arguments)
        check_kwargs(job, self.config)
        if "track" in job:
            from ..results import tracking

            # Its first status record rides in the push's own round trip (issue 47 item 2).
            return Planned(job, prepared.target, tracking.companions_for(job, prepared.companions))
        return Planned(job, prepared.target, prepared.companions)

    def plan(self, item: dict, companions: Companions = NONE, *, in_process: bool = False) -> Planned | None:
        """Plan one push without writing it: the job exactly as it will be stored (a sealed
        argument sealed, a unique lock taken), or ``None`` when a middleware stopped it."""
        return self.finish(self.prepare(item, companions), in_process=in_process)

    def write(self, planned: Planned) -> str:
        """Write a planned job (with its companions' commands) in one round trip; its jid."""
        job = planned.job
        jobs = [job]
        if planned.companions is NONE:  # almost every push: nothing beside the job
            if not testing.intercept(jobs, self.config):
                Writer(planned.target, self._redis).push(jobs)
        else:
            in_process = planned.companions.in_process
            if in_process is not None and testing.mode(self.config) is not None:
                in_process(job)
            if not testing.intercept(jobs, self.config):
                Writer(planned.target, self._redis).push(jobs, extra=planned.extra, front=planned.front)
        _enqueued(jobs)
        return job["jid"]

    async def awrite(self, planned: Planned) -> str:
        """:meth:`write`, awaited, on ``redis.asyncio`` (a testing mode runs the blocking one:
        inline mode runs the job)."""
        if testing.mode(self.config) is not None:
            from asgiref.sync import sync_to_async

            return await sync_to_async(self.write, thread_sensitive=True)(planned)
        job = planned.job
        await AsyncWriter(planned.target).push([job], extra=planned.extra, front=planned.front)
        _enqueued([job])
        return job["jid"]

    def push(self, item: dict, companions: Companions = NONE) -> str | None:
        """Push one job; returns its jid, or ``None`` if a middleware stopped it."""
        planned = self.finish(self.prepare(item, companions))
        return None if planned is None else self.write(planned)

    def _route(self, item: dict) -> Config | None:
        """The shard's config when the push names one or runs inside ``via()``; ``None``
        when the job's class or queue decides (known after normalizing)."""
        if self._redis is not None:
            return self.config  # an explicit client wins over any shard
        named = item.get("shard")
        if named is not None or (self._follows_via and shards.current() is not None):
            return shards.route(self.config, named=named)
        return None

    def _route_queue(self, item: dict, queue: str) -> Config:
        return shards.route(self.config, job_class=_job_class_of(item["class"]), queue=queue, via=self._follows_via)

    def push_bulk(self, item: dict) -> list[str | None]:
        """Push many jobs of one class: ``item["args"]`` is a list of argument lists (CORE-089).

        ``at`` may be one number or a list as long as ``args`` (absolute epoch
        seconds); ``spread_interval`` spreads them randomly over that many
        seconds; ``batch_size`` (default 1000) jobs go per round trip; ``jids``, a
        list as long as ``args``, gives the jobs their ids (a push deferred to a
        transaction's commit returns them before it happens).
        """
        item, args_list, at, spread, batch_size, jids_given = _bulk_parts(item)
        now = time.time()
        # The door's first half once for the whole push (one class lookup and options
        # merge; created_at is shared, as in Sidekiq's push_bulk); its second half per job:
        # its own jid, middleware pass and argument check.
        shared = {**item, "args": []}
        validate(shared)
        target = self._route(shared)
        template = _template(shared, self.config)
        target = target or self._route_queue(shared, template["queue"])
        jids: list[str | None] = []
        for start in range(0, len(args_list), batch_size):
            batch = []
            extra: list = []  # the companions' commands (a tracked job's first status record)
            for i in range(start, min(start + batch_size, len(args_list))):
                job = {**template, "args": args_list[i]}
                if jids_given is not None:
                    job["jid"] = jids_given[i]
                if spread:
                    job["at"] = now + random.random() * max(spread, 5)
                elif isinstance(at, list):
                    job["at"] = at[i]
                elif at is not None:
                    job["at"] = at
                if "at" in job and not _finite(job["at"]):
                    raise ValueError(f"job 'at' must be a finite number of epoch seconds, not {job['at']!r}")
                if "deadline" in job:
                    deadlines.check_at(job)
                planned = self.finish(Prepared(_fill(job), target))  # the door's second half, per job
                if planned is None:
                    jids.append(None)
                    continue
                batch.append(planned.job)
                jids.append(planned.jid)
                if planned.companions is not NONE:
                    self._companions_of(planned, extra)
            if batch:
                self.raw_push(batch, config=target, extra=extra)
                _enqueued(batch)
        return jids

    def check_bulk(self, item: dict) -> None:
        """Raise the ``ValueError`` (or ``TypeError``) :meth:`push_bulk` would raise for
        ``item`` before sending anything: its options, its class and every argument list."""
        item, args_list, at, spread, _, _ = _bulk_parts(item)
        shared = {**item, "args": []}
        validate(shared)
        template = _template(shared, self.config)
        name = template["class"]
        for args in args_list:
            check_arguments(name, args, self.config.on_complex_arguments)
        check_kwargs(dict(template), self.config)
        for when in (at if isinstance(at, list) else [at]):
            if when is not None and not _finite(when):
                raise ValueError(f"job 'at' must be a finite number of epoch seconds, not {when!r}")
            if when is not None and "deadline" in template:
                deadlines.check_at({**template, "at": when})

    def _through_middleware(self, job: dict, target: Config | None = None, *,
                            in_process: bool = False) -> dict | None:
        chain = self._chain
        if not len(chain):
            return job
        redis = None if in_process else self._redis or _middleware_client(target or self.config)
        result = chain.invoke((job["class"], job, job["queue"], redis), lambda: job)
        return result if result else None

    def _companions_of(self, planned: Planned, extra: list) -> None:
        """A bulk push's job with companions: their commands join the batch's round trip
        (under a testing mode, their in-process part runs instead)."""
        in_process = planned.companions.in_process
        if in_process is not None and testing.mode(self.config) is not None:
            in_process(planned.job)
        else:
            extra.extend(planned.extra)

    def raw_push(self, jobs: list[dict], *, config: Config | None = None, extra: list | None = None) -> None:
        """Write normalized jobs through the one write path (CORE-083/084), to
        ``config``'s Redis (a shard) or this client's, with ``extra`` commands first."""
        if testing.intercept(jobs, self.config):
            return
        if extra:
            Writer(config or self.config, self._redis).push(jobs, extra=extra)
        else:
            Writer(config or self.config, self._redis).push(jobs)


def _middleware_client(config: Config) -> Any:
    """The client middleware is handed: the push path's, or on a Redis Cluster the process's
    ``RedisCluster`` (issue 46 item 3: a unique lock goes into its queue's slot; a
    middleware not converted refuses it by name, see ``policies.client``)."""
    clustered = Writer(config).cluster()
    if clustered is not None:
        return clustered
    return connection.client_for(config)


def _enqueued(jobs: list[dict]) -> None:
    """Send ``job_enqueued`` for pushed jobs; free when nobody listens (DJ-047)."""
    if not signals.job_enqueued.receivers:
        return
    known = registry.registered()
    for job in jobs:
        signals.send(signals.job_enqueued, known.get(job["class"], job["class"]), job=job)


def push(item: dict) -> str | None:
    """Push one job dict with the default client."""
    return Client().push(item)


def _bulk_parts(item: dict) -> tuple[dict, list, Any, Any, int, list | None]:
    """``push_bulk``'s options checked and taken out of a copy of ``item``:
    (rest, args lists, at, spread_interval, batch_size, jids)."""
    item = dict(item)
    args_list = item.get("args")
    if not isinstance(args_list, list) or not all(isinstance(a, list) for a in args_list):
        raise ValueError(f"bulk 'args' must be a list of lists, not {args_list!r}")
    at = item.pop("at", None)
    spread = item.pop("spread_interval", None)
    jids = item.pop("jids", None)
    if at is not None and spread:
        raise ValueError("'at' and 'spread_interval' cannot be combined")
    if isinstance(at, list) and len(at) != len(args_list):
        raise ValueError(f"'at' has {len(at)} entries for {len(args_list)} jobs")
    if at is not None and not isinstance(at, list) and (isinstance(at, bool) or not isinstance(at, (int, float))):
        raise ValueError(f"'at' must be epoch seconds or a list of them, not {at!r}")
    if spread is not None and (isinstance(spread, bool) or not isinstance(spread, (int, float)) or spread <= 0):
        raise ValueError(f"'spread_interval' must be seconds > 0, not {spread!r}")
    if len(args_list) > 1 and item.get("jid"):
        raise ValueError("an explicit jid is only allowed when pushing a single job")
    if jids is not None and (not isinstance(jids, list) or len(jids) != len(args_list)
                             or not all(isinstance(j, str) and j for j in jids)):
        raise ValueError(f"'jids' must be a list of {len(args_list)} non-empty strings, not {jids!r}")
    batch_size = item.pop("batch_size", 100 if (at is not None or spread) else 1000)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"'batch_size' must be an integer >= 1, not {batch_size!r}")
    return item, args_list, at, spread, batch_size, jids


def push_bulk(item: dict) -> list[str | None]:
    return Client().push_bulk(item)


def enqueue_to(queue: str, klass: Any, *args: Any) -> str | None:
    """Push ``klass`` (a Job or any class name, e.g. a Ruby job) onto ``queue``."""
    return Client().push({"class": klass, "queue": queue, "args": list(args)})

