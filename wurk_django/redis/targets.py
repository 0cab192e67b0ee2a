"""Where a config's Redis is: a URL, a service watched by Redis Sentinel, or the
server of a Redis cache in ``settings.CACHES``.

``settings.WURK["REDIS"]`` (and each entry of ``WURK["SHARDS"]``) may be:

* a URL string: ``redis://``, ``rediss://`` (TLS) or ``unix:///path?db=N``;
* a dict with ``URL`` and optional ``OPTIONS`` (redis-py connection arguments);
* a dict with ``CACHE``: the alias of a Redis cache whose server and connection
  options are reused (django-redis ``OPTIONS``/``CONNECTION_POOL_KWARGS``, its
  ``SENTINELS`` form included);
* a dict with ``SENTINELS`` (``[(host, port), ...]``) and ``SERVICE`` (the master
  name the sentinels watch), optional ``OPTIONS`` (``db``, ``password``, ``ssl``...
  for the Redis servers) and ``SENTINEL_OPTIONS`` (for the sentinels themselves).

:func:`resolve` turns any of these into one :class:`RedisTarget`; the client
factory in :mod:`wurk_django.redis.connection` builds pools from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any
from urllib.parse import unquote, urlsplit

from ..errors import ConfigurationError

#: Sub-keys of a ``WURK["REDIS"]`` dict (and of a dict in ``WURK["SHARDS"]``).
REDIS_KEYS = ("URL", "CACHE", "SENTINELS", "SERVICE", "SENTINEL_OPTIONS", "POOL_SIZE", "OPTIONS")
DEFAULT_URL = "redis://localhost:6379/0"


@dataclass(frozen=True, eq=False)
class RedisTarget:
    """One Redis primary and how to reach it."""

    #: A redis-py URL; for a Sentinel target a description (``sentinel://h:p,h:p/service``)
    #: used in messages only.
    url: str
    #: redis-py connection arguments (``ssl_ca_certs``, ``password``, ``db``...).
    options: dict[str, Any] = field(default_factory=dict)
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str | None = None
    sentinel_options: dict[str, Any] = field(default_factory=dict)
    cache_alias: str | None = None
    #: ``POOL_SIZE`` of the ``REDIS``-style dict this came from: each pool's floor.
    pool_size: int | None = None

    @property
    def is_sentinel(self) -> bool:
        return bool(self.sentinels)

    @property
    def tls(self) -> bool:
        return self.url.startswith("rediss:") or bool(self.options.get("ssl"))

    @cached_property
    def identity(self) -> str:
        """Equal for targets that may share a connection pool (computed once: every
        client lookup, per job too, asks for it)."""
        return f"{self.url}|{sorted(self.options.items(), key=lambda kv: kv[0])!r}|{self.sentinel_options!r}"

    def __repr__(self) -> str:
        return f"RedisTarget({self.url})"


def resolve(value: Any, *, fallback_url: str = DEFAULT_URL) -> RedisTarget:
    """The :class:`RedisTarget` for a ``REDIS``-style value (see the module doc);
    ``None`` means ``fallback_url``. Raises :class:`ConfigurationError` naming what
    is wrong."""
    if value is None:
        return RedisTarget(fallback_url)
    if isinstance(value, str):
        if "://" not in value:
            raise ConfigurationError(f"{value!r} is not a redis://, rediss:// or unix:// URL")
        return RedisTarget(value)
    if not isinstance(value, dict):
        raise ConfigurationError(f"{value!r} is neither a Redis URL nor a dict")
    bad = dict_problems(value)
    if bad:
        raise ConfigurationError("; ".join(bad))
    options = dict(value.get("OPTIONS") or {})
    if value.get("CACHE"):
        cached = from_cache(value["CACHE"])
        target = RedisTarget(cached.url, {**cached.options, **options}, cached.sentinels, cached.service,
                             cached.sentinel_options, cache_alias=value["CACHE"])
    elif value.get("SENTINELS"):
        target = _sentinel_target(value["SENTINELS"], value["SERVICE"], options, value.get("SENTINEL_OPTIONS") or {})
    else:
        target = RedisTarget(value.get("URL") or fallback_url, options)
    # Each shard's dict may size its own pools; the pool cache key (identity) ignores it.
    return replace(target, pool_size=value.get("POOL_SIZE"))


def _sentinel_target(sentinels: Any, service: str, options: dict[str, Any],
                     sentinel_options: dict[str, Any]) -> RedisTarget:
    pairs = tuple((str(host), int(port)) for host, port in sentinels)
    shown = ",".join(f"{host}:{port}" for host, port in pairs)
    return RedisTarget(f"sentinel://{shown}/{service}/{options.get('db', 0)}", options, pairs, service,
                       dict(sentinel_options))


def _sentinel_pairs_ok(value: Any) -> bool:
    if not isinstance(value, (list, tuple)) or not value:
        return False
    for pair in value:
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and isinstance(pair[0], str) and pair[0]
                and isinstance(pair[1], int) and not isinstance(pair[1], bool) and 0 < pair[1] < 65536):
            return False
    return True


def dict_problems(redis: dict[str, Any]) -> list[str]:
    """What is wrong with a ``REDIS``-style dict, one message each (no network I/O)."""
    found = []
    for sub in redis:
        if sub not in REDIS_KEYS:
            found.append(f"unknown key {sub!r} (known keys: {', '.join(REDIS_KEYS)})")
    given = [k for k in ("URL", "CACHE", "SENTINELS") if redis.get(k)]
    if len(given) > 1:
        found.append(f"give one of URL, CACHE or SENTINELS, not {' and '.join(given)}")
    if "URL" in redis and not (isinstance(redis["URL"], str) and "://" in redis["URL"]):
        found.append(f"URL {redis['URL']!r} is not a redis:// URL")
    if "CACHE" in redis and not (isinstance(redis["CACHE"], str) and redis["CACHE"]):
        found.append(f"CACHE {redis['CACHE']!r} is not a cache alias")
    if "SENTINELS" in redis and not _sentinel_pairs_ok(redis["SENTINELS"]):
        found.append(f"SENTINELS {redis['SENTINELS']!r} is not a list of (host, port) pairs")
    if bool(redis.get("SENTINELS")) != bool(redis.get("SERVICE")):
        found.append("SENTINELS and SERVICE go together: the sentinels' addresses and the master name they watch")
    if "SERVICE" in redis and not (isinstance(redis["SERVICE"], str) and redis["SERVICE"]):
        found.append(f"SERVICE {redis['SERVICE']!r} is not a master name")
    if "SENTINEL_OPTIONS" in redis and not isinstance(redis["SENTINEL_OPTIONS"], dict):
        found.append("SENTINEL_OPTIONS must be a dict of redis-py arguments for the sentinels")
    if "POOL_SIZE" in redis and not (isinstance(redis["POOL_SIZE"], int) and not isinstance(redis["POOL_SIZE"], bool)
                                     and redis["POOL_SIZE"] >= 1):
        found.append(f"POOL_SIZE {redis['POOL_SIZE']!r} is not an integer >= 1")
    if "OPTIONS" in redis and not isinstance(redis["OPTIONS"], dict):
        found.append("OPTIONS must be a dict of redis-py connection arguments")
    return found


# Cache OPTIONS that are about the cache itself, not the connection (django-redis and Django's RedisCache).
_CACHE_ONLY_OPTIONS = {
    "CLIENT_CLASS", "SERIALIZER", "COMPRESSOR", "PARSER_CLASS", "CONNECTION_POOL_CLASS", "IGNORE_EXCEPTIONS",
    "LOG_IGNORED_EXCEPTIONS", "CLOSE_CONNECTION", "REPLICA_READ_ONLY", "SENTINELS", "SENTINEL_KWARGS",
    "CONNECTION_FACTORY", "REDIS_CLIENT_CLASS", "REDIS_CLIENT_KWARGS", "pool_class", "parser_class", "serializer",
}
_DJANGO_REDIS_RENAMES = {"PASSWORD": "password", "SOCKET_TIMEOUT": "socket_timeout",
                         "SOCKET_CONNECT_TIMEOUT": "socket_connect_timeout"}


def cache_redis_params(alias: str) -> tuple[str, dict[str, Any]]:
    """``(url, redis-py kwargs)`` copied from the Redis cache ``alias`` (DJ-002); for a
    Sentinel cache the URL is a description: use :func:`from_cache` to connect."""
    target = from_cache(alias)
    return target.url, target.options


def from_cache(alias: str) -> RedisTarget:
    """The server of the Redis cache ``alias`` in ``settings.CACHES`` (DJ-002).

    Only the server address and connection arguments are reused: wurk opens its
    own pool, and the cache's ``KEY_PREFIX``/``VERSION`` never apply to wurk keys.
    django-redis's Sentinel form (``OPTIONS["SENTINELS"]``, ``LOCATION``
    ``redis://<service>/<db>``) becomes a Sentinel target.
    """
    from django.conf import settings

    caches = getattr(settings, "CACHES", {}) or {}
    if alias not in caches:
        raise ConfigurationError(f"WURK['REDIS']['CACHE'] names cache {alias!r}, which is not in settings.CACHES")
    params = caches[alias]
    backend = str(params.get("BACKEND", ""))
    if "redis" not in backend.lower():
        raise ConfigurationError(f"cache {alias!r} uses {backend!r}, not a Redis cache backend")
    location = params.get("LOCATION")
    if isinstance(location, str):
        # Django's RedisCache takes "primary,replica,..."; wurk writes, so it needs the primary.
        location = location.split(",")[0].strip()
    elif isinstance(location, (list, tuple)) and location:
        location = str(location[0])
    if not isinstance(location, str) or "://" not in location:
        raise ConfigurationError(f"cache {alias!r} has no redis:// LOCATION (got {params.get('LOCATION')!r})")
    raw_options = params.get("OPTIONS") or {}
    options: dict[str, Any] = {}
    for name, value in raw_options.items():
        if name in _CACHE_ONLY_OPTIONS:
            continue
        if name == "CONNECTION_POOL_KWARGS" and isinstance(value, dict):
            options.update(value)
        else:
            options[_DJANGO_REDIS_RENAMES.get(name, name)] = value
    # wurk sizes its own pool from CONCURRENCY; the cache's cap is for request threads.
    options.pop("max_connections", None)
    sentinels = raw_options.get("SENTINELS")
    if not sentinels:
        return RedisTarget(location, options, cache_alias=alias)
    if not _sentinel_pairs_ok(sentinels):
        raise ConfigurationError(f"cache {alias!r}: SENTINELS {sentinels!r} is not a list of (host, port) pairs")
    # django-redis names the master in LOCATION's host part and the database in its path.
    parts = urlsplit(location)
    if not parts.hostname:
        raise ConfigurationError(f"cache {alias!r}: LOCATION {location!r} names no Sentinel service")
    path = parts.path.strip("/")
    if path:
        if not path.isdigit():
            raise ConfigurationError(f"cache {alias!r}: LOCATION {location!r} has no database number")
        options.setdefault("db", int(path))
    if parts.password:
        options.setdefault("password", unquote(parts.password))
    if parts.username:
        options.setdefault("username", unquote(parts.username))
    if parts.scheme == "rediss":
        options.setdefault("ssl", True)
    sentinel_kwargs = raw_options.get("SENTINEL_KWARGS") or {}
    target = _sentinel_target(sentinels, parts.hostname, options, sentinel_kwargs)
    return RedisTarget(target.url, target.options, target.sentinels, target.service, target.sentinel_options,
                       cache_alias=alias)
