"""The frozen config a process runs with, built from the settings table's rows."""

from __future__ import annotations

import copy
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from ..errors import ConfigurationError
from ..redis.targets import RedisTarget, resolve
from .table import current
from .targets import redis_url
from .validation import problems, raw_settings


class Config:
    """The settings a process runs with: WURK over the defaults, resolved once.

    Every row of the settings table fills one attribute with its typed value
    (``config.concurrency``, ``config.queues``, ``config.statsd``...; see
    docs/configuration.md for the keys); ``config["KEY"]`` and ``config.raw`` give
    the values as written. The worker builds one at boot and never re-reads
    settings afterwards; the client reads :func:`get_config`, which follows
    ``override_settings``.
    """

    raw: dict[str, Any]
    #: The name of the shard this config points at (see :meth:`for_shard`).
    shard: str
    #: What :meth:`for_shard` was given (``None`` for the default Redis).
    shard_spec: str | dict[str, Any] | None
    redis_target: RedisTarget
    redis_url: str
    redis_options: dict[str, Any]
    redis_cache_alias: str | None
    # The attributes filled from the rows used most by the engine, for readers and type checkers.
    concurrency: int
    queues: list[tuple[str, int]]
    timeout: float
    default_job_options: dict[str, Any]
    error_handlers: list[Callable]
    death_handlers: list[Callable]
    capsules: tuple
    #: Set only on the copy of the config one capsule of a worker process runs with
    #: (:func:`wurk_django.server.capsules.capsule_config`): that capsule's place in
    #: the process. ``None`` for a config built from settings.
    capsule: Any = None
    #: What modules worked out from this config and keep for the next call (the push
    #: path's client, the client middleware chain, job templates), by name. A copy of the
    #: config (a shard's, a capsule's) starts with an empty one.
    memo: dict[str, Any]

    def __init__(self, raw: dict[str, Any] | None = None, **overrides: Any) -> None:
        raw = dict(raw_settings() if raw is None else raw)
        bad = problems(raw)
        if bad:
            raise ConfigurationError("; ".join(str(p) for p in bad))
        table = current()
        values = {**table.defaults, **raw, **{k.upper(): v for k, v in overrides.items() if v is not None}}
        self.raw = values
        self.memo = {}
        self._set_target(resolve(values["REDIS"], fallback_url=redis_url(values)))
        self.shard = "default"
        self.shard_spec = None
        self._root: Config | None = None
        self._shards: dict[str, Config] = {}
        for attribute, key, parse in table.attributes:
            value = values[key]
            setattr(self, attribute, value if parse is None else parse(value))
        if values.get("TRANSACTIONAL_PUSH"):  # the other name of ENQUEUE_ON_COMMIT (DJ-030)
            self.enqueue_on_commit = True

    def __getattr__(self, name: str) -> Any:
        # Only reached when no row filled ``name``: say which attributes exist.
        if name.startswith("_"):
            raise AttributeError(name)
        known = sorted(attribute for attribute, _, _ in current().attributes)
        raise AttributeError(f"Config has no attribute {name!r} (no setting fills it); the settings' "
                             f"attributes are: {', '.join(known)}")

    def __copy__(self) -> Config:
        clone = object.__new__(type(self))
        for name, value in vars(self).items():
            setattr(clone, name, value)
        clone.memo = {}  # what was worked out for this config is worked out again for the copy
        return clone

    def _set_target(self, target: RedisTarget) -> None:
        self.redis_target = target
        self.redis_url = target.url
        self.redis_options = dict(target.options)
        self.redis_cache_alias = target.cache_alias

    def for_shard(self, shard: str | dict[str, Any] | None) -> Config:
        """This config pointed at another Redis: a name in ``WURK["SHARDS"]``
        (``"default"`` or ``None``: the config's own ``REDIS``), a URL, or a dict of
        the ``REDIS`` form; every other setting stays the same. Raises
        ``ValueError`` naming an unknown shard or a bad value."""
        root = self._root or self
        if shard is None or shard == "default":
            return root
        if not isinstance(shard, (str, dict)):
            raise ValueError(f"a Redis shard is a name, a URL or a dict, not {shard!r}")
        key = shard if isinstance(shard, str) else repr(sorted(shard.items(), key=lambda kv: str(kv[0])))
        found = root._shards.get(key)
        if found is not None:
            return found
        value: Any = shard
        name = shard if isinstance(shard, str) else "custom"
        if isinstance(shard, str) and "://" not in shard:
            shards = root.raw.get("SHARDS") or {}
            if shard not in shards:
                known = ", ".join(sorted(["default", *shards]))
                raise ValueError(f"unknown Redis shard {shard!r}; the known shards are {known}")
            value = shards[shard]
        try:
            target = resolve(value)
        except ConfigurationError as exc:
            raise ValueError(f"bad Redis shard {shard!r}: {exc}") from None
        derived = copy.copy(root)
        derived._set_target(target)
        derived.shard = name
        derived.shard_spec = shard
        derived._root = root
        derived._shards = {}
        root._shards[key] = derived
        return derived

    @property
    def queue_mode(self) -> str:
        """``strict`` (no weights), ``random`` (all weight 1) or ``weighted`` (CORE-101)."""
        weights = {w for _, w in self.queues}
        if weights == {0}:
            return "strict"
        if weights == {1}:
            return "random"
        return "weighted"

    @property
    def queue_names(self) -> list[str]:
        return list(dict.fromkeys(name for name, _ in self.queues))

    def __getitem__(self, key: str) -> Any:
        return self.raw[key]


_cached: tuple[int, Config] | None = None


#: The shard of the enclosing ``wurk_django.via()`` block (see shards.py).
VIA: ContextVar[Any] = ContextVar("wurk_via", default=None)


def base_config() -> Config:
    """The config of ``settings.WURK`` itself, ignoring any ``via()`` block."""
    global _cached
    raw = raw_settings()
    if _cached is None or _cached[0] != id(raw):
        _cached = (id(raw), Config(raw))
    return _cached[1]


def get_config() -> Config:
    """The config a call uses here (:func:`wurk_django.context.config`): the enclosing
    ``wurk_django.via()`` block's shard, else the running job's config, else the
    settings' (rebuilt whenever ``settings.WURK`` changes)."""
    from ..context import config

    return config()


def reset_config(**kwargs: Any) -> None:
    global _cached
    _cached = None
