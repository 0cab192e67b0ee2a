"""What every limiter shares: the name, options and fingerprint, registration in
Redis, the call surface (``within_limit`` and ``acquire``), status, reset.

A limiter object holds no mutable state, so one module-level instance is
shared by every thread; each call that takes capacity gets its own
:class:`Held` record.
"""

from __future__ import annotations

import hashlib
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any, ClassVar

import redis as redis_lib
from redis.cluster import RedisCluster

from .. import context
from ..client.writer import Writer
from ..conf import Config
from ..errors import RedisClusterError
from ..redis.cluster import cluster_client
from ..redis.cluster_layout import SidekiqLayout, layout_of
from ..redis.connection import cached_client, cluster_for, get_redis
from ..redis.scripts import lua
from . import options as opts

logger = logging.getLogger("wurk_django.limiter")


class OverLimit(Exception):  # noqa: N818 - Sidekiq Enterprise's name
    """The limiter refused capacity within its wait.

    Inside a job the limiter middleware catches it and reschedules the job;
    elsewhere (a view, a script) the caller handles it, usually as HTTP 429.
    ``limiter`` is the limiter that refused; ``job`` is set by the middleware.
    """

    def __init__(self, limiter: Any, job: dict | None = None, message: str | None = None) -> None:
        self.limiter = limiter
        self.job = job
        super().__init__(message or f"limit '{limiter.name}' ({limiter.type}) reached")


class Held:
    """One call's hold on a limiter: ``acquired`` is False when the policy skipped the call."""

    __slots__ = ("limiter", "acquired", "slot", "started", "acquired_at", "estimate")

    def __init__(self, limiter: Any, acquired: bool, *, slot: str | None = None, started: float = 0.0,
                 acquired_at: float = 0.0, estimate: float = 0) -> None:
        self.limiter = limiter
        self.acquired = acquired
        self.slot = slot
        self.started = started
        self.acquired_at = acquired_at
        self.estimate = estimate

    def __bool__(self) -> bool:
        return self.acquired

    def points_used(self, actual: float) -> float | None:
        """Settle a points call with what it really cost (no-op for other types)."""
        return None


class _Acquisition:
    """``with limiter.acquire() as held:``; the wait bounds only the entry, never the body."""

    __slots__ = ("limiter", "kwargs", "held", "release")

    def __init__(self, limiter: Limiter, kwargs: dict[str, Any]) -> None:
        self.limiter = limiter
        self.kwargs = kwargs
        self.held: Held | None = None
        self.release: Callable[[], None] | None = None

    def __enter__(self) -> Held:
        if self.limiter.unregistered:
            self.limiter._try_register()
        self.held = self.limiter._take(**self.kwargs)
        if self.held.acquired:
            self.release = self.limiter._release_once(self.held)
        return self.held

    def __exit__(self, *exc: Any) -> None:
        if self.release is not None:
            self.release()


def _running_hold() -> Callable[[Callable[[], None]], Callable[[], None]] | None:
    """The running worker job's ``Run.hold``, or None outside a worker's job."""
    ctx = context.running()
    if ctx is None or ctx.unit is None:
        return None
    from ..server.run import run as runs  # a worker's job: the engine is loaded already

    current = runs.current()
    return current.hold if current is not None else None


# -- Redis access ----------------------------------------------------------------------

_dedicated: dict[tuple[int, str, int], redis_lib.Redis] = {}
_dedicated_lock = threading.Lock()


def redis_client(config: Config | None = None) -> redis_lib.Redis:
    """The limiters' connection: ``WURK["LIMITER_REDIS"]`` if set (a dedicated pool,
    so rate-limit traffic cannot starve job fetches), else the main pool. On a Redis
    Cluster (issue 46) a redis-py ``RedisCluster``: its keys are then the cluster
    layout's (:func:`~wurk_django.redis.cluster_layout.layout_of`)."""
    config = config or context.config()  # inside a job, the worker's: its shard keeps the counters
    spec = config.limiter_redis
    if spec is None:
        try:
            return context.redis_for(config)
        except RedisClusterError:
            # Outside a job (a view, a script) on a cluster: the engine's cluster client.
            clustered = cluster_for(config)
            if clustered is None:
                raise
            return clustered
    size = spec.pool_size
    key = (os.getpid(), spec.url or config.redis_url, size)
    client = _dedicated.get(key)
    if client is None:
        with _dedicated_lock:
            client = _dedicated.get(key)
            if client is None:
                target = config
                if spec.url:
                    # Another server: the main connection settings do not apply to it.
                    raw = {k: v for k, v in config.raw.items() if k not in ("REDIS", "REDIS_URL")}
                    target = Config({**raw, "REDIS_URL": spec.url})
                try:
                    client = get_redis("limiter", pool_size=size, config=target)
                except RedisClusterError:
                    # A cluster (the main one, or the one spec.url names): a RedisCluster of
                    # its own, so limiter traffic still has its own connections per node.
                    client = cached_client("limiter-cluster", target, lambda: cluster_client(target))
                _dedicated[key] = client
    return client


def send(commands: list[tuple[Any, ...]], client: redis_lib.Redis | None = None) -> list[Any]:
    """Send ``commands`` in one round trip (scripts as EVALSHA, resent as EVAL on NOSCRIPT).

    On a Redis Cluster, one round trip per slot the commands touch, on that slot's
    primary (a limiter's own commands are one slot: ``{l:<name>}``); a command without
    a key (``TIME``) goes with the first group."""
    config = context.config()
    client = client or redis_client(config)
    if not isinstance(client, RedisCluster):
        return Writer(config, redis=client).send(commands)
    slots = [None if key is None else client.keyslot(key) for key in map(_first_key, commands)]
    anywhere = next((slot for slot in slots if slot is not None), 0)
    groups: dict[int, list[int]] = {}
    for index, slot in enumerate(slots):
        groups.setdefault(anywhere if slot is None else slot, []).append(index)
    replies: list[Any] = [None] * len(commands)
    for slot, indexes in groups.items():
        node = client.nodes_manager.get_node_from_slot(slot)
        sent = Writer(config, redis=client.get_redis_connection(node)).send([commands[i] for i in indexes])
        for index, reply in zip(indexes, sent, strict=True):
            replies[index] = reply
    return replies


def _first_key(command: tuple[Any, ...]) -> Any:
    """The key a limiter command addresses (the first of a script's KEYS), or None (``TIME``)."""
    name = str(command[0]).upper()
    if name in ("EVALSHA", "EVAL"):
        return command[3] if int(command[2]) > 0 else None
    return command[1] if len(command) > 1 else None


def run(script: str, keys_: list[str], args: list[Any], client: redis_lib.Redis | None = None) -> Any:
    """Run one limiter script (``wurk_django/limiter/lua/<script>.lua``) and return its reply."""
    return send([lua(f"limiter/lua/{script}").command(keys_, args)], client)[0]


def layout(client: Any = None) -> SidekiqLayout:
    """Where this process's limiter keys are: the layout of the limiters' Redis."""
    return layout_of(client if client is not None else redis_client())


# -- the base class ----------------------------------------------------------------------


class Limiter:
    """Base of the five Redis-backed limiter types."""

    type: ClassVar[str] = ""
    #: Keyword arguments of ``within_limit`` that belong to the limiter, not to ``fn``.
    call_options: ClassVar[tuple[str, ...]] = ()

    def __init__(self, name: str, options: dict[str, Any], *, register: bool = True) -> None:
        self.name = opts.name(name)
        self.options = options
        self.options_json = opts.to_json(options)
        self.fingerprint = hashlib.sha256(f"{self.type}|{self.name}|{self.options_json}".encode()).hexdigest()
        self.ttl: int = options["ttl"]
        self.policy: str = options.get("policy", "raise")
        #: Tests set a function returning epoch seconds (read from Redis TIME and then
        #: advanced) to drive the scripts' clock; None: the scripts read TIME.
        self.clock: Callable[[], float] | None = None
        #: True while registration is owed. Defining a limiter never talks to Redis (it is
        #: usually defined at module level, and importing a module must work, and stay
        #: fast, with Redis down): it registers at its first use, and again at the next
        #: use if that failed.
        self.unregistered = register

    def _try_register(self) -> None:
        try:
            self.register()
            self.unregistered = False
        except Exception as exc:
            # Registration only feeds the dashboard's list: the call itself goes on (and
            # fails on its own if Redis is really gone).
            self.unregistered = True
            logger.warning("could not register limiter %r yet (%s); it works all the same", self.name, exc)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} {self.options_json}>"

    # -- metadata ----------------------------------------------------------------------

    @property
    def meta_key(self) -> str:
        """The metadata hash (in the layout of the limiters' Redis)."""
        return layout().limiter_meta(self.name)

    def register(self) -> int:
        """Write the metadata (type, options, fingerprint) and list the name; returns 1
        when the name was newly added to the list."""
        client = redis_client()
        where = layout_of(client)
        meta = where.limiter_meta(self.name)
        fields = ("type", self.type, "options", self.options_json, "fingerprint", self.fingerprint)
        if not where.cluster:
            return int(run("register", [meta, where.limiter_list],
                           [self.name, self.type, self.options_json, self.fingerprint, self.ttl], client))
        # A Redis Cluster: the metadata is in the limiter's slot, the list in {wurk}, so
        # register.lua's gate (list the name only when the metadata was written afresh)
        # spans two steps. A process that dies between them leaves the name off the
        # dashboard's list until the metadata expires and is written afresh; the limiter
        # itself works all the same.
        created, _ttl = send([("HSET", meta, *fields), ("EXPIRE", meta, self.ttl)], client)
        if int(created) > 0:
            return int(send([("SADD", where.limiter_list, self.name)], client)[0])
        return 0

    def state_keys(self, where: SidekiqLayout | None = None) -> list[str]:
        """The keys holding this limiter's counters (what :meth:`reset` deletes), in the
        layout ``where`` (default: the limiters' Redis's)."""
        raise NotImplementedError

    def reset(self) -> None:
        """Forget every use so far; metadata and list membership stay."""
        client = redis_client()
        send([("DEL", *self.state_keys(layout_of(client)))], client)

    def delete(self) -> None:
        """Remove the limiter from Redis entirely: state, metadata and list membership."""
        client = redis_client()
        where = layout_of(client)
        send([("DEL", *self.state_keys(where), where.limiter_meta(self.name)),
              ("SREM", where.limiter_list, self.name)], client)

    # -- status ------------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """``{"used", "limit", "reset_at", "available"}``: ``reset_at`` is epoch seconds or None."""
        raise NotImplementedError

    @property
    def size(self) -> float:
        """Capacity in use now (the status's ``used``)."""
        return self.status()["used"]

    @staticmethod
    def _status(used: float, limit: float | None, reset_at: float | None) -> dict[str, Any]:
        return {"used": used, "limit": limit, "reset_at": reset_at, "available": limit is None or used < limit}

    def redis_now(self) -> float:
        """Now, by the Redis clock (or the test clock), in epoch seconds."""
        if self.clock is not None:
            return self.clock()
        s, us = send([("TIME",)])[0]
        return int(s) + int(us) / 1e6

    def _now_args(self) -> list[str]:
        """The optional trailing "now" argument of a script: only when a test drives the clock."""
        return [] if self.clock is None else [repr(float(self.clock()))]

    # -- the call surface --------------------------------------------------------------

    def within_limit(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run ``fn(*args, **kwargs)`` once the limiter has room and return its result.

        Waits up to the limiter's ``wait_timeout`` for room (the wait never bounds
        ``fn`` itself), then raises :class:`OverLimit`; under ``policy="ignore"``
        (or ``"skip"``) it returns None without running ``fn``. Limiter keywords
        (``used=`` for bucket and window, ``estimate=`` for points) are taken out
        of ``kwargs`` before ``fn`` is called.
        """
        mine = {k: kwargs.pop(k) for k in self.call_options if k in kwargs}
        if self.unregistered:
            self._try_register()
        held = self._take(**mine)
        if not held.acquired:
            return None
        release = self._release_once(held)
        try:
            return fn(*args, **kwargs)
        finally:
            release()

    def acquire(self, **kwargs: Any) -> _Acquisition:
        """``with limiter.acquire() as held:`` runs the body holding capacity.

        Raises :class:`OverLimit` on entry when the wait runs out. Under
        ``policy="ignore"`` nothing is raised and the body must check
        ``held.acquired``.
        """
        unknown = set(kwargs) - set(self.call_options)
        if unknown:
            raise TypeError(f"{self.type} limiter acquire() got unexpected keywords {sorted(unknown)}")
        return _Acquisition(self, kwargs)

    def _take(self, **kwargs: Any) -> Held:
        raise NotImplementedError

    def _release_once(self, held: Held) -> Callable[[], None]:
        """How ``held`` is given back: by its holder as usual, or at once if the worker
        abandons the job's thread first (a hard time limit, a revoke's grace), so a thread
        stuck in C code does not keep the capacity until ``lock_timeout``; once either way."""
        def release() -> None:
            self._release(held)

        if type(self)._give_back is Limiter._give_back:
            return release  # nothing to give back: no bookkeeping either
        hold = _running_hold()
        return hold(release) if hold is not None else release

    def _release(self, held: Held) -> None:
        """Give back what ``held`` holds. A failure here is logged, not raised: the call
        already ran (a job that raised now would run it a second time), and a slot
        that was not given back is reclaimed after ``lock_timeout`` anyway."""
        try:
            self._give_back(held)
        except Exception as exc:
            logger.warning("could not release limiter %r (%s); its slot frees itself after lock_timeout",
                           self.name, exc)

    def _give_back(self, held: Held) -> None:
        """Release what ``held`` holds (only concurrent and points have anything to do)."""

    def _refused(self, deadline: float, pause: float) -> bool:
        """After a refusal: False when the policy gives up, raise when the wait is over,
        else sleep ``pause`` (cut to what is left of the wait) and return True."""
        if self.policy != "raise":
            return False
        left = deadline - time.monotonic()
        if left <= 0:
            raise OverLimit(self)
        time.sleep(min(max(pause, 0.0), left))
        return True
