"""``settings.WURK``: defaults, validation, and the frozen config a worker runs with.

The setting is one dict, read lazily so ``override_settings(WURK=...)`` takes
effect at once (DJ-001). Keys are upper case, as Django settings are. Unknown
keys and wrong types are reported by :func:`problems` (used by the ``wurk``
command at boot and by Django's system checks) instead of being ignored.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.utils.module_loading import import_string

from .errors import ConfigurationError

QUEUE_NAME = re.compile(r"^[a-z_:.\-0-9]+$", re.IGNORECASE)
MODES = ("off", "standalone", "embedded", "swarm")

# Every key the WURK dict may hold, with its default. Features add theirs here.
DEFAULTS: dict[str, Any] = {
    "REDIS_URL": None,  # None: env REDIS_URL, else redis://localhost:6379/0
    "REDIS": None,  # {"URL": ..., "CACHE": alias, "POOL_SIZE": n, "OPTIONS": {...}}
    "CONCURRENCY": 5,
    "QUEUES": ["default"],
    "TIMEOUT": 25,
    "POLL_INTERVAL_AVERAGE": None,
    "AVERAGE_SCHEDULED_POLL_INTERVAL": 5,
    "MAX_RETRIES": 25,
    "DEAD_MAX_JOBS": 10_000,
    "DEAD_TIMEOUT_IN_SECONDS": 180 * 24 * 3600,
    "ON_COMPLEX_ARGUMENTS": "raise",
    "DEFAULT_JOB_OPTIONS": {"retry": True, "queue": "default"},
    "TAG": None,  # None: the project directory's name
    "LABELS": [],
    "ERROR_HANDLERS": [],
    "DEATH_HANDLERS": [],
    "CLIENT_MIDDLEWARE": [],
    "SERVER_MIDDLEWARE": [],
    "LOGGED_JOB_ATTRIBUTES": ["bid", "tags"],
    "SKIP_DEFAULT_JOB_LOGGING": False,
    "BACKTRACE_CLEANER": None,
    "LOG_FORMAT": "plain",
    "LOG_FLUSH_INTERVAL": 0.1,  # seconds INFO lines wait to be written in one batch; 0 writes each at once (RUN-706)
    "VERBOSE": False,
    "ENVIRONMENT": None,
    "FETCH_CLASS": None,  # dotted path; None: the built-in fetcher
    "AUTODISCOVER": ["jobs", "tasks"],
    "IMPORT_ON_MISS": None,  # module prefixes a payload's class may be imported from
    "MODE": "off",
    "EMBEDDED_CONCURRENCY": 2,  # processor threads per web process when MODE is "embedded" (DJ-062)
    "ENQUEUE_ON_COMMIT": False,
    "MAX_ITERATION_RUNTIME": None,  # seconds an iterable job runs before re-queueing itself
    "RELIABLE_PUSH": True,
    "RELIABLE_PUSH_BUFFER": 1000,
    "FETCH_POLL_INTERVAL": 2,
    "SUPER_FETCH_REAPER_INTERVAL": 60,
    "REAPER_ORPHAN_GRACE": 30,
    "TESTING": None,  # None/"disable": real pushes; "fake" records them; "inline" runs them (DJ-031)
    "ADMIN_READ_ONLY": False,  # admin dashboard refuses every POST and hides its buttons (DJ-051)
    "ADMIN_AUTHORIZE": None,  # callable/dotted path (request, method, path) -> bool, asked last (DJ-051)
    "API_TOKEN": None,  # bearer token for the stats JSON and Prometheus endpoints (DJ-056)
    "SWARM": None,  # [{"count": n, "queues": [...], "concurrency": c}, ...]: the swarm topology (RUN-401)
    "MEMORY_LIMIT_MB": None,  # RSS cap per swarm child; None: env WURK_MAXMEM_MB / SIDEKIQ_MAXMEM_MB; 0 off (RUN-407)
    "SWARM_HEARTBEAT_TIMEOUT": 60,  # a swarm child whose beat stalls this long is replaced; 0/False off (RUN-408)
    # -- features (each checked in detail by its own package) --
    "UNIQUE_JOBS": False,  # unique jobs on (ENT-201)
    "ENCRYPTION": None,  # {"ACTIVE_VERSION": n, "KEYS": {n: base64 key}} (ENT-6xx)
    "PERIODIC": [],  # cron entries registered at worker boot (ENT-4xx)
    "LEADER": None,  # {"TTL": 30, "RENEW_INTERVAL": 15, "FOLLOWER_INTERVAL": 60, "INITIAL_WAIT": 1, "CACHE_TTL": 5}
}

#: Sub-keys of a ``WURK["REDIS"]`` dict.
REDIS_KEYS = ("URL", "CACHE", "POOL_SIZE", "OPTIONS")
TESTING_MODES = (None, "disable", "fake", "inline")


def _is_int(v: Any, minimum: int | None = None) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and (minimum is None or v >= minimum)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _callables(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and all(callable(x) or isinstance(x, str) for x in v)


def _middleware(v: Any) -> bool:
    if not isinstance(v, (list, tuple)):
        return False
    for entry in v:
        if isinstance(entry, (list, tuple)):
            entry = entry[0] if entry else None
        if not (isinstance(entry, str) or callable(entry)):
            return False
    return True


def _swarm_topology(v: Any) -> bool:
    if not isinstance(v, (list, tuple)) or not v:
        return False
    for slot in v:
        if not isinstance(slot, dict) or set(slot) - {"count", "queues", "concurrency"}:
            return False
        if not _is_int(slot.get("count", 1), 1) or not _is_int(slot.get("concurrency", 1), 1):
            return False
        queues = slot.get("queues", ["default"])
        if not isinstance(queues, (list, tuple)) or not queues:
            return False
        try:
            for spec in queues:
                parse_queue(spec)
        except ConfigurationError:
            return False
    return True


# key -> (predicate, what the value must be)
_CHECKS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "REDIS_URL": (lambda v: v is None or (isinstance(v, str) and "://" in v), "a redis:// URL"),
    "REDIS": (lambda v: v is None or isinstance(v, (str, dict)), "a URL or a dict"),
    "CONCURRENCY": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "QUEUES": (lambda v: isinstance(v, (list, tuple)) and len(v) > 0, "a non-empty list of queue specs"),
    "TIMEOUT": (lambda v: _is_number(v) and v > 0, "a number of seconds > 0"),
    "POLL_INTERVAL_AVERAGE": (lambda v: v is None or (_is_number(v) and v > 0), "None or seconds > 0"),
    "AVERAGE_SCHEDULED_POLL_INTERVAL": (lambda v: _is_number(v) and v > 0, "seconds > 0"),
    "MAX_RETRIES": (lambda v: _is_int(v, 0), "an integer >= 0"),
    "DEAD_MAX_JOBS": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "DEAD_TIMEOUT_IN_SECONDS": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "ON_COMPLEX_ARGUMENTS": (lambda v: v in ("raise", "warn", False), '"raise", "warn" or False'),
    "DEFAULT_JOB_OPTIONS": (lambda v: isinstance(v, dict), "a dict"),
    "TAG": (lambda v: v is None or isinstance(v, str), "a string"),
    "LABELS": (lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v), "a list of strings"),
    "ERROR_HANDLERS": (_callables, "a list of callables or dotted paths"),
    "DEATH_HANDLERS": (_callables, "a list of callables or dotted paths"),
    "CLIENT_MIDDLEWARE": (_middleware, "a list of middleware classes or dotted paths"),
    "SERVER_MIDDLEWARE": (_middleware, "a list of middleware classes or dotted paths"),
    "LOGGED_JOB_ATTRIBUTES": (lambda v: isinstance(v, (list, tuple)), "a list of payload keys"),
    "SKIP_DEFAULT_JOB_LOGGING": (lambda v: isinstance(v, bool), "True or False"),
    "BACKTRACE_CLEANER": (lambda v: v is None or callable(v) or isinstance(v, str), "a callable or dotted path"),
    "LOG_FORMAT": (lambda v: v in ("plain", "json"), '"plain" or "json"'),
    "LOG_FLUSH_INTERVAL": (lambda v: _is_number(v) and 0 <= v <= 10, "seconds from 0 to 10 (0: write each line at once)"),
    "VERBOSE": (lambda v: isinstance(v, bool), "True or False"),
    "ENVIRONMENT": (lambda v: v is None or isinstance(v, str), "a string"),
    "FETCH_CLASS": (lambda v: v is None or isinstance(v, str) or callable(v), "a dotted path"),
    "AUTODISCOVER": (lambda v: isinstance(v, (list, tuple)), "a list of module names"),
    "IMPORT_ON_MISS": (lambda v: v is None or isinstance(v, (list, tuple)), "None or a list of module prefixes"),
    "MODE": (lambda v: v in MODES, " or ".join(f'"{m}"' for m in MODES)),
    "EMBEDDED_CONCURRENCY": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "ENQUEUE_ON_COMMIT": (lambda v: isinstance(v, bool), "True or False"),
    "MAX_ITERATION_RUNTIME": (lambda v: v is None or (_is_number(v) and v > 0), "None or seconds > 0"),
    "RELIABLE_PUSH": (lambda v: isinstance(v, bool), "True or False"),
    "RELIABLE_PUSH_BUFFER": (lambda v: _is_int(v, 1), "an integer >= 1"),
    "FETCH_POLL_INTERVAL": (lambda v: _is_number(v) and v > 0, "seconds > 0"),
    "SUPER_FETCH_REAPER_INTERVAL": (lambda v: _is_number(v) and v > 0, "seconds > 0"),
    "REAPER_ORPHAN_GRACE": (lambda v: _is_number(v) and v >= 0, "seconds >= 0 (0 disables)"),
    "TESTING": (lambda v: v in TESTING_MODES, 'None, "disable", "fake" or "inline"'),
    "ADMIN_READ_ONLY": (lambda v: isinstance(v, bool), "True or False"),
    "ADMIN_AUTHORIZE": (lambda v: v is None or callable(v) or isinstance(v, str), "None, a callable or a dotted path"),
    "API_TOKEN": (lambda v: v is None or (isinstance(v, str) and len(v) >= 16), "None or a string of 16+ characters"),
    "SWARM": (lambda v: v is None or _swarm_topology(v), "None or a list of {count, queues, concurrency} dicts"),
    "MEMORY_LIMIT_MB": (lambda v: v is None or (_is_number(v) and v >= 0), "None or megabytes >= 0 (0 disables)"),
    "SWARM_HEARTBEAT_TIMEOUT": (lambda v: v is False or (_is_number(v) and (v == 0 or v >= 20)),
                                "seconds >= 20, or 0/False to disable"),
    "UNIQUE_JOBS": (lambda v: isinstance(v, bool), "True or False"),
    "ENCRYPTION": (lambda v: v is None or isinstance(v, dict), "None or a dict with ACTIVE_VERSION and KEYS"),
    "PERIODIC": (lambda v: _periodic_shape(v), "a list of {'cron': ..., 'job': ...} dicts (see docs/periodic.md)"),
    "LEADER": (lambda v: v is None or _leader_tuning(v),
               "None or a dict of TTL, RENEW_INTERVAL, FOLLOWER_INTERVAL, INITIAL_WAIT, CACHE_TTL seconds "
               "(RENEW_INTERVAL < TTL)"),
}


def _periodic_shape(v: Any) -> bool:
    # The shape only; problems() adds what is wrong inside each entry (schedule, options).
    return isinstance(v, (list, tuple)) and all(isinstance(e, dict) and "cron" in e and "job" in e for e in v)


LEADER_KEYS = ("TTL", "RENEW_INTERVAL", "FOLLOWER_INTERVAL", "INITIAL_WAIT", "CACHE_TTL")


def _leader_tuning(v: Any) -> bool:
    if not isinstance(v, dict) or set(v) - set(LEADER_KEYS):
        return False
    if not all(_is_number(x) and x >= 0 for x in v.values()):
        return False
    if any(v.get(k, 1) <= 0 for k in ("TTL", "RENEW_INTERVAL", "FOLLOWER_INTERVAL")):
        return False
    return v.get("RENEW_INTERVAL", 15) < v.get("TTL", 30)


@dataclass(frozen=True)
class Problem:
    key: str
    message: str
    hint: str = ""
    #: "unknown" (no such key), "value" (wrong type or value), "queue", "redis" or "periodic";
    #: the system checks map it to an id.
    kind: str = "value"

    def __str__(self) -> str:
        return f"WURK[{self.key!r}]: {self.message}" + (f" ({self.hint})" if self.hint else "")


def raw_settings() -> dict[str, Any]:
    from django.conf import settings

    value = getattr(settings, "WURK", None) or {}
    if not isinstance(value, dict):
        raise ConfigurationError(f"settings.WURK must be a dict, not {type(value).__name__}")
    return value


def parse_queue(spec: Any) -> tuple[str, int]:
    """``"name"``, ``"name,weight"`` or ``[name, weight]`` -> ``(name, weight)`` (CORE-101)."""
    if isinstance(spec, (list, tuple)) and len(spec) in (1, 2):
        name, weight = spec[0], spec[1] if len(spec) == 2 else 0
    elif isinstance(spec, str):
        name, _, weight = spec.partition(",")
        weight = weight.strip() or 0
    else:
        raise ConfigurationError(f"queue spec {spec!r} must be 'name' or 'name,weight'")
    name = str(name).strip()
    if not QUEUE_NAME.match(name):
        raise ConfigurationError(f"queue name {name!r} must match {QUEUE_NAME.pattern}")
    try:
        weight = int(weight)
    except (TypeError, ValueError):
        raise ConfigurationError(f"queue weight {weight!r} in {spec!r} must be an integer") from None
    if weight < 0:
        raise ConfigurationError(f"queue weight in {spec!r} must be >= 0")
    return name, weight


def problems(raw: dict[str, Any] | None = None) -> list[Problem]:
    """Everything wrong with ``settings.WURK``, without touching the network."""
    raw = raw_settings() if raw is None else raw
    found: list[Problem] = []
    for key, value in raw.items():
        if key not in DEFAULTS:
            close = difflib.get_close_matches(str(key).upper(), DEFAULTS, n=1, cutoff=0.75)
            hint = f"did you mean {close[0]!r}?" if close else "see docs/configuration.md for the keys"
            found.append(Problem(key, "unknown setting", hint, kind="unknown"))
            continue
        check, want = _CHECKS.get(key, (lambda v: True, ""))
        if not check(value):
            found.append(Problem(key, f"{value!r} is not {want}"))
    if "QUEUES" in raw and isinstance(raw["QUEUES"], (list, tuple)):
        for spec in raw["QUEUES"]:
            try:
                parse_queue(spec)
            except ConfigurationError as exc:
                found.append(Problem("QUEUES", str(exc), kind="queue"))
    redis = raw.get("REDIS")
    if isinstance(redis, dict):
        found.extend(_redis_dict_problems(redis))
    if "PERIODIC" in raw and _periodic_shape(raw["PERIODIC"]):
        from .periodic.config import entry_problems

        for message in entry_problems(raw["PERIODIC"]):
            found.append(Problem("PERIODIC", message, "see docs/periodic.md", kind="periodic"))
    return found


def _redis_dict_problems(redis: dict[str, Any]) -> list[Problem]:
    found = []
    for sub in redis:
        if sub not in REDIS_KEYS:
            found.append(Problem("REDIS", f"unknown key {sub!r}", "known keys: " + ", ".join(REDIS_KEYS), kind="redis"))
    if redis.get("URL") and redis.get("CACHE"):
        found.append(Problem("REDIS", "give either URL or CACHE, not both", kind="redis"))
    if "URL" in redis and not (isinstance(redis["URL"], str) and "://" in redis["URL"]):
        found.append(Problem("REDIS", f"URL {redis['URL']!r} is not a redis:// URL", kind="redis"))
    if "CACHE" in redis and not (isinstance(redis["CACHE"], str) and redis["CACHE"]):
        found.append(Problem("REDIS", f"CACHE {redis['CACHE']!r} is not a cache alias", kind="redis"))
    if "POOL_SIZE" in redis and not _is_int(redis["POOL_SIZE"], 1):
        found.append(Problem("REDIS", f"POOL_SIZE {redis['POOL_SIZE']!r} is not an integer >= 1", kind="redis"))
    if "OPTIONS" in redis and not isinstance(redis["OPTIONS"], dict):
        found.append(Problem("REDIS", "OPTIONS must be a dict of redis-py connection arguments", kind="redis"))
    return found


# Cache OPTIONS that are about the cache itself, not the connection (django-redis and Django's RedisCache).
_CACHE_ONLY_OPTIONS = {
    "CLIENT_CLASS", "SERIALIZER", "COMPRESSOR", "PARSER_CLASS", "CONNECTION_POOL_CLASS", "IGNORE_EXCEPTIONS",
    "LOG_IGNORED_EXCEPTIONS", "CLOSE_CONNECTION", "REPLICA_READ_ONLY", "SENTINELS", "SENTINEL_KWARGS",
    "pool_class", "parser_class", "serializer",
}
_DJANGO_REDIS_RENAMES = {"PASSWORD": "password", "SOCKET_TIMEOUT": "socket_timeout",
                         "SOCKET_CONNECT_TIMEOUT": "socket_connect_timeout"}


def cache_redis_params(alias: str) -> tuple[str, dict[str, Any]]:
    """``(url, redis-py kwargs)`` copied from the Redis cache ``alias`` (DJ-002).

    Only the server address and connection arguments are reused: wurk opens its
    own pool, and the cache's ``KEY_PREFIX``/``VERSION`` never apply to wurk keys.
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
    options: dict[str, Any] = {}
    for name, value in (params.get("OPTIONS") or {}).items():
        if name in _CACHE_ONLY_OPTIONS:
            continue
        if name == "CONNECTION_POOL_KWARGS" and isinstance(value, dict):
            options.update(value)
        else:
            options[_DJANGO_REDIS_RENAMES.get(name, name)] = value
    # wurk sizes its own pool from CONCURRENCY; the cache's cap is for request threads.
    options.pop("max_connections", None)
    return location, options


def redis_url(raw: dict[str, Any] | None = None) -> str:
    raw = raw_settings() if raw is None else raw
    redis = raw.get("REDIS")
    if isinstance(redis, str):
        return redis
    if isinstance(redis, dict) and redis.get("URL"):
        return redis["URL"]
    return raw.get("REDIS_URL") or os.environ.get("REDIS_URL") or "redis://localhost:6379/0"


def _load(entry: Any) -> Any:
    return import_string(entry) if isinstance(entry, str) else entry


class Config:
    """The settings a process runs with: WURK over the defaults, resolved once.

    The worker builds one at boot and never re-reads settings afterwards;
    the client reads :func:`get_config`, which follows ``override_settings``.
    """

    def __init__(self, raw: dict[str, Any] | None = None, **overrides: Any) -> None:
        raw = dict(raw_settings() if raw is None else raw)
        bad = problems(raw)
        if bad:
            raise ConfigurationError("; ".join(str(p) for p in bad))
        values = {**DEFAULTS, **raw, **{k.upper(): v for k, v in overrides.items() if v is not None}}
        self.raw = values
        self.redis_url = redis_url(values)
        self.redis_options: dict[str, Any] = dict((values["REDIS"] or {}).get("OPTIONS", {})) if isinstance(values["REDIS"], dict) else {}
        self.redis_cache_alias: str | None = values["REDIS"].get("CACHE") if isinstance(values["REDIS"], dict) else None
        if self.redis_cache_alias:
            self.redis_url, cache_options = cache_redis_params(self.redis_cache_alias)
            self.redis_options = {**cache_options, **self.redis_options}
        self.concurrency: int = values["CONCURRENCY"]
        self.queues: list[tuple[str, int]] = [parse_queue(q) for q in values["QUEUES"]]
        self.timeout: float = float(values["TIMEOUT"])
        self.poll_interval_average: float | None = values["POLL_INTERVAL_AVERAGE"]
        self.average_scheduled_poll_interval: float = values["AVERAGE_SCHEDULED_POLL_INTERVAL"]
        self.max_retries: int = values["MAX_RETRIES"]
        self.dead_max_jobs: int = values["DEAD_MAX_JOBS"]
        self.dead_timeout: int = values["DEAD_TIMEOUT_IN_SECONDS"]
        self.on_complex_arguments = values["ON_COMPLEX_ARGUMENTS"]
        self.default_job_options: dict[str, Any] = {"retry": True, "queue": "default", **values["DEFAULT_JOB_OPTIONS"]}
        self.tag: str = values["TAG"] if values["TAG"] is not None else _default_tag()
        self.labels: list[str] = list(values["LABELS"])
        self.error_handlers: list[Callable] = [_load(h) for h in values["ERROR_HANDLERS"]]
        self.death_handlers: list[Callable] = [_load(h) for h in values["DEATH_HANDLERS"]]
        self.client_middleware = list(values["CLIENT_MIDDLEWARE"])
        self.server_middleware = list(values["SERVER_MIDDLEWARE"])
        self.logged_job_attributes: list[str] = list(values["LOGGED_JOB_ATTRIBUTES"])
        self.skip_default_job_logging: bool = values["SKIP_DEFAULT_JOB_LOGGING"]
        cleaner = values["BACKTRACE_CLEANER"]
        self.backtrace_cleaner: Callable[[list[str]], list[str]] | None = _load(cleaner) if cleaner else None
        self.log_format: str = values["LOG_FORMAT"]
        self.log_flush_interval: float = float(values["LOG_FLUSH_INTERVAL"])
        self.verbose: bool = values["VERBOSE"]
        self.environment: str | None = values["ENVIRONMENT"]
        self.fetch_class = _load(values["FETCH_CLASS"]) if values["FETCH_CLASS"] else None
        self.autodiscover: list[str] = list(values["AUTODISCOVER"])
        self.import_on_miss = values["IMPORT_ON_MISS"]
        self.mode: str = values["MODE"]
        self.embedded_concurrency: int = values["EMBEDDED_CONCURRENCY"]
        self.enqueue_on_commit: bool = values["ENQUEUE_ON_COMMIT"]
        self.reliable_push: bool = values["RELIABLE_PUSH"]
        self.reliable_push_buffer: int = values["RELIABLE_PUSH_BUFFER"]
        self.fetch_poll_interval: float = values["FETCH_POLL_INTERVAL"]
        self.reaper_interval: float = values["SUPER_FETCH_REAPER_INTERVAL"]
        self.reaper_orphan_grace: float = values["REAPER_ORPHAN_GRACE"]
        self.testing: str | None = values["TESTING"]
        self.swarm: list[dict[str, Any]] | None = values["SWARM"]
        self.memory_limit_mb: float | None = values["MEMORY_LIMIT_MB"]
        self.swarm_heartbeat_timeout: float = float(values["SWARM_HEARTBEAT_TIMEOUT"] or 0)

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


def _default_tag() -> str:
    from django.conf import settings

    base = getattr(settings, "BASE_DIR", None)
    return os.path.basename(str(base).rstrip("/")) if base else os.path.basename(os.getcwd())


_cached: tuple[int, Config] | None = None


def get_config() -> Config:
    """The config for client-side calls, rebuilt whenever ``settings.WURK`` changes."""
    global _cached
    raw = raw_settings()
    if _cached is None or _cached[0] != id(raw):
        _cached = (id(raw), Config(raw))
    return _cached[1]


def reset_config(**kwargs: Any) -> None:
    global _cached
    _cached = None
