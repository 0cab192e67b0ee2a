"""``settings.WURK``: defaults, validation, and the frozen config a worker runs with.

The setting is one dict, read lazily so ``override_settings(WURK=...)`` takes
effect at once (DJ-001). Keys are upper case, as Django settings are. Unknown
keys and wrong types are reported by :func:`problems` (used by the ``wurk``
command at boot and by Django's system checks) instead of being ignored.
"""

from __future__ import annotations

import copy
import difflib
import os
import re
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.utils.module_loading import import_string

from .errors import ConfigurationError
from .redis_target import REDIS_KEYS, RedisTarget, cache_redis_params, dict_problems, resolve

__all__ = ["REDIS_KEYS", "Config", "cache_redis_params", "get_config", "problems"]

QUEUE_NAME = re.compile(r"^[a-z_:.\-0-9]+$", re.IGNORECASE)


def is_queue_name(name: object) -> bool:
    """The one queue-name rule, shared by the client, the worker and the admin:
    letters, digits and ``_ : . -``, nothing else (no spaces, ``|`` or markup)."""
    return isinstance(name, str) and QUEUE_NAME.fullmatch(name) is not None


MODES = ("off", "standalone", "embedded", "swarm")

TESTING_MODES = (None, "disable", "fake", "inline")


REDIS_SCHEMES = ("redis", "rediss", "unix")


def redis_url_problem(url: Any) -> str | None:
    """What is wrong with a Redis URL (the scheme, a database that is not a number), or ``None``.

    redis-py would otherwise fail later with a traceback (an unknown scheme) or
    quietly use database 0 (``/abc``).
    """
    from urllib.parse import parse_qs, urlsplit

    if not isinstance(url, str) or "://" not in url:
        return f"{url!r} is not a Redis URL (redis://host:port/db)"
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError as exc:
        return f"{url!r} is not a valid URL: {exc}"
    if parts.scheme not in REDIS_SCHEMES:
        return f"{url!r} has scheme {parts.scheme!r}; use one of " + ", ".join(f"{s}://" for s in REDIS_SCHEMES)
    databases = parse_qs(parts.query).get("db", [])
    if parts.scheme != "unix" and parts.path not in ("", "/"):
        databases.append(parts.path.lstrip("/"))
    for db in databases:
        if not db.isdigit():
            return f"{url!r} names database {db!r}; a database is a number (redis://host:6379/0)"
    return None


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


def _statsd(v: Any) -> bool:
    if v is None or callable(v) or isinstance(v, str):
        return True
    if not isinstance(v, dict) or set(v) - {"HOST", "PORT", "TAGS", "NAMESPACE", "CLIENT", "OPTIONS"}:
        return False
    port = v.get("PORT", 8125)
    tags = v.get("TAGS", [])
    return (isinstance(v.get("HOST", ""), str) and _is_int(port, 1) and port < 65536
            and isinstance(tags, (list, tuple)) and all(isinstance(t, str) for t in tags)
            and all(v.get(k) is None or callable(v[k]) or isinstance(v[k], str) for k in ("CLIENT", "OPTIONS"))
            and (v.get("NAMESPACE") is None or isinstance(v["NAMESPACE"], str)))


def _history(v: Any) -> bool:
    if v is False:
        return True
    if not isinstance(v, dict) or set(v) - {"ROLLUP_INTERVAL", "SNAPSHOT_INTERVAL", "STREAM_CAP"}:
        return False
    rollup, snap, cap = v.get("ROLLUP_INTERVAL", 60), v.get("SNAPSHOT_INTERVAL"), v.get("STREAM_CAP", 10_000)
    return ((_is_number(rollup) and (rollup == 0 or rollup >= 5)) and (snap is None or (_is_number(snap) and snap >= 1))
            and _is_int(cap, 100))


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


@dataclass(frozen=True)
class Setting:
    """One key of ``settings.WURK``: its default, the check its value must pass (``want``
    says in words what that is, for error messages), one line of documentation, and the
    heading it is listed under in docs/configuration.md."""

    name: str
    default: Any
    check: Callable[[Any], bool]
    want: str
    doc: str
    section: str = "Features"
    #: A feature's own detailed check, as a dotted path to ``fn(value) -> [messages]``,
    #: used instead of the generic "is not <want>" message (imported only when the key
    #: is set, so the settings table never imports a feature). ``kind`` names the
    #: system check id the messages map to (see checks.py).
    detail: str | None = None
    kind: str = "value"


# Headings of docs/configuration.md, in the order they are listed.
REDIS = "Redis"
WORKER = "Worker"
RETRIES = "Retries and the dead set"
CLIENT = "Client"
LOGGING = "Logging"
ADMIN = "Admin dashboard"
SWARM = "Swarm"
FEATURES = "Features"
LIMITERS = "Rate limiters"

# The one table of settings: DEFAULTS, problems() (and so the system checks and the
# worker's boot check) and the table in docs/configuration.md all come from it.
# One Setting per key; a feature adds its rows at the end, under FEATURES.
SETTINGS: tuple[Setting, ...] = (
    # -- Redis --
    Setting("REDIS_URL", None,
            lambda v: v is None or redis_url_problem(v) is None, "a redis://host:port/<number> URL",
            "Redis server URL (`redis://`, `rediss://`, `unix://`). `None`: the `REDIS_URL` environment variable,"
            " else `redis://localhost:6379/0`. Another scheme, a bad port or a database that is not a number"
            " (`/abc`, `?db=x`) fails `manage.py check` and stops the worker with one line, the environment"
            " variable included.", REDIS),
    Setting("REDIS", None,
            lambda v: v is None or isinstance(v, dict) or redis_url_problem(v) is None,
            "a redis://host:port/<number> URL or a dict",
            "Richer form, wins over `REDIS_URL`: a URL string, or a dict with `URL`, `POOL_SIZE` (connections per"
            " pool, at least: see \"Redis server and connections\" below), `OPTIONS` (keyword arguments for redis-py: TLS, ACL user/password, timeouts...), or `CACHE` "
            "(the alias of a Redis cache in `settings.CACHES` whose server and connection options are reused, its"
            " django-redis `SENTINELS` form included; its `KEY_PREFIX` never applies to job keys), or `SENTINELS` "
            "(`[(host, port), ...]`) with `SERVICE` (the master name the sentinels watch) and optional "
            "`SENTINEL_OPTIONS` (redis-py arguments for the sentinels; `OPTIONS` are for the Redis servers, `db` "
            "included). Give one of `URL`, `CACHE` or `SENTINELS`. See docs/redis.md.", REDIS),
    Setting("SHARDS", {},
            lambda v: isinstance(v, dict) and all(isinstance(k, str) and k for k in v), "a dict of name: Redis",
            "Other Redis servers jobs can be pushed to, by name: each value a URL or a dict of the `REDIS` form. "
            "Push to one with `wurk_django.via(\"name\")`, `Job.set(shard=\"name\")`, a job class's `shard` "
            "attribute or `QUEUE_SHARDS`; run workers against one with `manage.py wurk --shard name`. The name "
            "`\"default\"` always means `REDIS`. See docs/redis.md.", REDIS),
    Setting("QUEUE_SHARDS", {},
            lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()),
            "a dict of queue name: shard name",
            "Queue name to shard name (a key of `SHARDS`): jobs pushed to that queue go to that shard unless "
            "the push names a shard itself.", REDIS),
    Setting("ON_REDIS_ERROR", None,
            lambda v: v is None or callable(v) or isinstance(v, str), "None, a callable or a dotted path",
            "Callable (or dotted path) called as `hook(event)` for every Redis error the write path retries, "
            "refuses to replay or gives up on; `event` has `error`, `attempt`, `retried`, `pool` and `action` "
            "(see docs/redis.md, Replay policy). A failing hook is logged and ignored.", REDIS),
    # -- Worker --
    Setting("CONCURRENCY", 5,
            lambda v: _is_int(v, 1), "an integer >= 1",
            "Job threads per worker process (integer >= 1).", WORKER),
    Setting("QUEUES", ["default"],
            lambda v: isinstance(v, (list, tuple)) and len(v) > 0, "a non-empty list of queue specs",
            'Queues to fetch from, each `"name"` or `"name,weight"` (or `[name, weight]`). No weights: strict '
            "order, a queue is only read when all before it are empty. All weights 1: random order. Otherwise "
            "weighted random. Names may hold letters, digits, `_ : . -`.", WORKER),
    Setting("TIMEOUT", 25,
            lambda v: _is_number(v) and v > 0, "a number of seconds > 0",
            "Shutdown grace: seconds running jobs get to finish after a stop request before they are pushed back "
            "to their queue. Keep it below your process manager's kill timeout.", WORKER),
    Setting("POLL_INTERVAL_AVERAGE", None,
            lambda v: v is None or (_is_number(v) and v > 0), "None or seconds > 0",
            "Fixed average seconds between polls of the `schedule` and `retry` sets. `None`: scaled by the number"
            " of live processes, so the cluster as a whole polls about every `AVERAGE_SCHEDULED_POLL_INTERVAL` "
            "seconds.", WORKER),
    Setting("AVERAGE_SCHEDULED_POLL_INTERVAL", 5,
            lambda v: _is_number(v) and v > 0, "seconds > 0",
            "The cluster-wide poll average used when `POLL_INTERVAL_AVERAGE` is `None`.", WORKER),
    Setting("FETCH_CLASS", None,
            lambda v: v is None or isinstance(v, str) or callable(v), "a dotted path",
            "Dotted path of a fetcher class replacing the built-in one. `None`: reliable fetch - each fetched job"
            " is moved to a private per-process list until it finishes, so a crashed worker's jobs are recovered.", WORKER),
    Setting("FETCH_POLL_INTERVAL", 2,
            lambda v: _is_number(v) and v > 0, "seconds > 0",
            "Seconds a fetcher blocks waiting on an empty queue before looking again (and noticing paused "
            "queues).", WORKER),
    Setting("SUPER_FETCH_REAPER_INTERVAL", 60,
            lambda v: _is_number(v) and v > 0, "seconds > 0",
            "Seconds between sweeps that bring back jobs left in the private lists of processes that died.", WORKER),
    Setting("REAPER_ORPHAN_GRACE", 30,
            lambda v: _is_number(v) and v >= 0, "seconds >= 0 (0 disables)",
            "Seconds a dead-looking process's private list must stay untouched before the reaper takes its jobs "
            "back, so a worker that is still booting is left alone. `0` disables the grace.", WORKER),
    Setting("MODE", "off",
            lambda v: v in MODES, " or ".join(f'"{m}"' for m in MODES),
            'Where a worker runs besides `manage.py wurk`: `"off"` (only the command), `"standalone"`, '
            '`"embedded"` (worker threads inside the web server process) or `"swarm"` (forked children). See '
            "docs/worker.md and docs/embedded.md.", WORKER),
    Setting("EMBEDDED_CONCURRENCY", 2,
            lambda v: _is_int(v, 1), "an integer >= 1",
            'Job threads each web process runs when `MODE` is `"embedded"`. See docs/embedded.md.', WORKER),
    Setting("TAG", None,
            lambda v: v is None or isinstance(v, str), "a string",
            "Label shown for the process in the Web UI. `None`: the name of the project directory (`BASE_DIR`).", WORKER),
    Setting("LABELS", [],
            lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v), "a list of strings",
            "Extra strings shown next to the process in the Web UI.", WORKER),
    Setting("AUTODISCOVER", ["jobs", "tasks"],
            lambda v: isinstance(v, (list, tuple)), "a list of module names",
            "Module names imported from every installed app when a worker starts, so job classes are registered "
            "before the first fetch.", WORKER),
    Setting("IMPORT_ON_MISS", None,
            lambda v: v is None or isinstance(v, (list, tuple)), "None or a list of module prefixes",
            "Module prefixes from which a job module may be imported when a payload names a class that is not "
            "registered yet. `None`: the installed apps' packages. A payload never causes an import outside these"
            " prefixes, and what it finds must be a registered job.", WORKER),
    # -- Retries and the dead set --
    Setting("MAX_RETRIES", 25,
            lambda v: _is_int(v, 0), "an integer >= 0",
            "How many retries `retry: True` means (about 20 days with the default back-off).", RETRIES),
    Setting("DEAD_MAX_JOBS", 10_000,
            lambda v: _is_int(v, 1), "an integer >= 1",
            "Size cap of the dead set; older entries are trimmed when a job dies.", RETRIES),
    Setting("DEAD_TIMEOUT_IN_SECONDS", 180 * 24 * 3600,
            lambda v: _is_int(v, 1), "an integer >= 1",
            "Age cap of the dead set (180 days).", RETRIES),
    Setting("ERROR_HANDLERS", [],
            _callables, "a list of callables or dotted paths",
            "Callables (or dotted paths) called as `handler(exc, context, config)` for every failed job attempt, "
            "after the built-in logging. Use them to report to an error tracker. A failing handler is logged; the"
            " others still run.", RETRIES),
    Setting("DEATH_HANDLERS", [],
            _callables, "a list of callables or dotted paths",
            "Callables (or dotted paths) called as `handler(job, exc)` whenever a job dies: retries exhausted, "
            "discarded, `retry: False`, poison pill, invalid payload, a due job the scheduler could not push, or a "
            "kill from the admin or the API (then `exc` is a `wurk_django.server.death.JobKilled`).", RETRIES),
    Setting("BACKTRACE_CLEANER", None,
            lambda v: v is None or callable(v) or isinstance(v, str), "a callable or dotted path",
            "Callable (or dotted path) taking and returning the list of backtrace lines stored with `backtrace: "
            "True` jobs, e.g. to drop framework frames.", RETRIES),
    # -- Client --
    Setting("DEFAULT_JOB_OPTIONS", {"retry": True, "queue": "default"},
            lambda v: isinstance(v, dict), "a dict",
            "Options under every push; class options and `set()` override them. Also what a job pushed by name "
            "only (a Ruby class) gets.", CLIENT),
    Setting("ON_COMPLEX_ARGUMENTS", "raise",
            lambda v: v in ("raise", "warn", False), '"raise", "warn" or False',
            'What a push does with an argument that is not plain JSON: `"raise"` a `ValueError` naming it, '
            '`"warn"` (log, then convert tuples to lists and anything else to `str`), or `False` (convert '
            "silently). See [jobs.md](jobs.md#arguments).", CLIENT),
    Setting("CLIENT_MIDDLEWARE", [],
            _middleware, "a list of middleware classes or dotted paths",
            "Middleware run around every push, outermost first: classes or dotted paths, or `(class, {kwargs})` "
            "pairs.", CLIENT),
    Setting("SERVER_MIDDLEWARE", [],
            _middleware, "a list of middleware classes or dotted paths",
            "Middleware run around every job execution (and by `perform_inline`), same forms.", CLIENT),
    Setting("ENQUEUE_ON_COMMIT", False,
            lambda v: isinstance(v, bool), "True or False",
            "Push inside a database transaction only once it commits (nothing is pushed on rollback). Per call: "
            '`set(on_commit=True)` or `set(on_commit="alias")` for another database. `perform_bulk` is '
            "deferred too (its jids are returned at once).", CLIENT),
    Setting("MAX_ITERATION_RUNTIME", None,
            lambda v: v is None or (_is_number(v) and v > 0), "None or seconds > 0",
            "Seconds an iterable job (`wurk_django.iterable.IterableJob`) runs before it saves its cursor and "
            "re-queues itself; `None` runs until done or until the worker stops.", CLIENT),
    Setting("RELIABLE_PUSH", True,
            lambda v: isinstance(v, bool), "True or False",
            "When Redis is unreachable, keep pushed jobs in an in-memory buffer (per process) and let a "
            "background thread deliver them, oldest first, once Redis answers; later pushes deliver the backlog "
            "first. Jobs of a batch (`bid`) are never buffered. A push whose reply was lost may arrive twice "
            "(docs/reliability.md). `False`: a push raises `redis.ConnectionError` at the call site instead. On by "
            "default because a web request should not fail on a Redis blip; a script that must know at once (a "
            "cron job whose exit status matters) sets it to `False`.", CLIENT),
    Setting("RELIABLE_PUSH_EXIT_WAIT", 5,
            lambda v: _is_number(v) and 0 <= v <= 300, "seconds from 0 to 300",
            "Seconds a process that exits with jobs still buffered keeps retrying Redis; every job still "
            "undelivered then is logged by jid at ERROR (on stderr when logging is not configured), never lost "
            "without a word.", CLIENT),
    Setting("RELIABLE_PUSH_BUFFER", 1000,
            lambda v: _is_int(v, 1), "an integer >= 1",
            "How many jobs that buffer holds; a push that does not fit raises "
            "`wurk_django.reliable_push.PushBufferFull` at the call site (nothing is dropped silently).", CLIENT),
    Setting("TESTING", None,
            lambda v: v in TESTING_MODES, 'None, "disable", "fake" or "inline"',
            'For test suites: `"fake"` records pushes in memory instead of Redis, `"inline"` runs them at once, '
            '`None`/`"disable"` pushes for real.', CLIENT),
    # -- Logging --
    Setting("LOG_FORMAT", "plain",
            lambda v: v in ("plain", "json"), '"plain" or "json"',
            'Worker log lines as `"plain"` text or `"json"` (one object per line).', LOGGING),
    Setting("LOG_FLUSH_INTERVAL", 0.1,
            lambda v: _is_number(v) and 0 <= v <= 10, "seconds from 0 to 10 (0: write each line at once)",
            "Seconds INFO lines wait to be written together by the worker's log writer (0 to 10; `0` writes each "
            "line at once). WARNING and above are always written at once. See docs/worker.md, Logging.", LOGGING),
    Setting("VERBOSE", False,
            lambda v: isinstance(v, bool), "True or False",
            "Debug-level worker logging.", LOGGING),
    Setting("ENVIRONMENT", None,
            lambda v: v is None or isinstance(v, str), "a string",
            'Environment name (`"development"`, `"production"`...); in development failed jobs log their full '
            "traceback.", LOGGING),
    Setting("LOGGED_JOB_ATTRIBUTES", ["bid", "tags"],
            lambda v: isinstance(v, (list, tuple)), "a list of payload keys",
            "Payload keys added to the log context of each job's lines.", LOGGING),
    Setting("SKIP_DEFAULT_JOB_LOGGING", False,
            lambda v: isinstance(v, bool), "True or False",
            'Drop the built-in "start"/"done"/"fail" line per job (your middleware logs instead).', LOGGING),
    # -- Admin dashboard --
    Setting("ADMIN_READ_ONLY", False,
            lambda v: isinstance(v, bool), "True or False",
            "The dashboard in the Django admin shows data only: no buttons, every POST refused.", ADMIN),
    Setting("ADMIN_AUTHORIZE", None,
            lambda v: v is None or callable(v) or isinstance(v, str), "None, a callable or a dotted path",
            "Callable (or dotted path) `(request, method, path) -> bool` asked last for every dashboard request, "
            "on top of the admin permissions; `False` refuses.", ADMIN),
    Setting("API_TOKEN", None,
            lambda v: v is None or (isinstance(v, str) and len(v) >= 16), "None or a string of 16+ characters",
            "Bearer token (16 characters or more) for the stats JSON and Prometheus endpoints; `None` leaves them"
            " to logged-in staff only.", ADMIN),
    # -- Swarm --
    Setting("SWARM", None,
            lambda v: v is None or _swarm_topology(v), "None or a list of {count, queues, concurrency} dicts",
            'Topology for `manage.py wurk` as a swarm: a list of `{"count": n, "queues": [...], "concurrency": '
            "c}` slots, each forked `count` times with those queues and threads. Setting it makes `manage.py "
            "wurk` supervise a swarm (`--processes 0` runs one process instead). See [swarm.md](swarm.md).", SWARM),
    Setting("MEMORY_LIMIT_MB", None,
            lambda v: v is None or (_is_number(v) and v >= 0), "None or megabytes >= 0 (0 disables)",
            "RSS cap per swarm child in MB; a child at or over it is replaced gracefully (new child first, then "
            "the old one drains). `None`: the `WURK_MAXMEM_MB` (or `SIDEKIQ_MAXMEM_MB`) environment variable; `0`"
            " disables. Linux only.", SWARM),
    Setting("SWARM_HEARTBEAT_TIMEOUT", 60,
            lambda v: v is False or (_is_number(v) and (v == 0 or v >= 20)), "seconds >= 20, or 0/False to disable",
            "Seconds a swarm child's heartbeat may stand still before the supervisor replaces it (at least 20); "
            "`0` or `False` disables.", SWARM),
    # -- Features --
    Setting("UNIQUE_JOBS", False,
            lambda v: isinstance(v, bool), "True or False",
            "Turns unique jobs on (`unique_for` on a job class does nothing until this is `True`); needed in every"
            " pushing process and every worker; see docs/unique.md.", FEATURES),
    Setting("ENCRYPTION", None,
            lambda v: v is None or isinstance(v, dict), "None or a dict with ACTIVE_VERSION and KEYS",
            'Encrypted job arguments: `{"ACTIVE_VERSION": n, "KEYS": {n: base64 of a 32-byte key}}` (versions may'
            " be ints or digit strings); checked by `wurk.E007`; see docs/encryption.md.", FEATURES,
            # Its own messages: the generic one would print the value, i.e. the keys.
            detail="wurk_django.encryption.keyring.problems", kind="encryption"),
    Setting("PERIODIC", [],
            lambda v: _periodic_shape(v), "a list of {'cron': ..., 'job': ...} dicts (see docs/periodic.md)",
            'Cron entries registered when a worker boots: a list of `{"cron": "0 4 * * *", "job":'
            ' "shop.jobs.Nightly", "queue": ..., "args": [...], "tz": "Asia/Tokyo", ...}` dicts, fired once per'
            " tick by the cluster's leader; see [periodic.md](periodic.md).", FEATURES,
            detail="wurk_django.conf.periodic_problems", kind="periodic"),
    Setting("LEADER", None,
            lambda v: v is None or _leader_tuning(v),
            "None or a dict of TTL, RENEW_INTERVAL, FOLLOWER_INTERVAL, INITIAL_WAIT, CACHE_TTL seconds"
            " (RENEW_INTERVAL < TTL)",
            'Leader-election tuning, seconds: `{"TTL": 30, "RENEW_INTERVAL": 15, "FOLLOWER_INTERVAL": 60,'
            ' "INITIAL_WAIT": 1, "CACHE_TTL": 5}` (any subset; `RENEW_INTERVAL` must stay below `TTL`). The'
            " defaults are Sidekiq Enterprise's; `WURK_LEADER=false` in a process's environment keeps it from"
            " ever leading. See [periodic.md](periodic.md).", FEATURES),
    Setting("LIMITER_BACKOFF", None,
            lambda v: v is None or callable(v) or isinstance(v, str), "None, a callable or a dotted path",
            "Callable (or dotted path) `(limiter, job, exc) -> seconds`, how long a job that hit a"
            " limit waits before it runs again when its limiter has no `backoff` of its own. `None`: 300 s ×"
            " `overrated` plus 1..300 s; see docs/limiters.md.", LIMITERS),
    Setting("LIMITER_ERRORS", [],
            lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, (type, str)) for x in v),
            "a list of exception classes or dotted paths",
            "More exception classes (or dotted paths) a job may raise to be rescheduled like"
            " `limiter.OverLimit` (an HTTP 429 error from a partner API, say); `OverLimit` is always included.",
            LIMITERS),
    Setting("LIMITER_REDIS", None,
            lambda v: v is None or (isinstance(v, dict) and set(v) <= {"URL", "POOL_SIZE"}
                                    and (v.get("URL") is None or (isinstance(v["URL"], str) and "://" in v["URL"]))
                                    and (v.get("POOL_SIZE") is None or _is_int(v["POOL_SIZE"], 1))),
            'None or {"URL": redis:// URL, "POOL_SIZE": integer >= 1}',
            '`{"URL": ..., "POOL_SIZE": 10}`, a dedicated connection pool for limiter calls;'
            " `None` uses the main pool.", LIMITERS),
    Setting("LIMITER_CAP_ACTION", "dead",
            lambda v: v in ("dead", "retry"), '"dead" or "retry"',
            "A job rate limited as many times as its limiter's `reschedule` cap (default 20)"
            ' goes to the dead set with a `rate_limited:` message (`"dead"`, Ruby wurk) or into the normal'
            ' retries (`"retry"`, Sidekiq Enterprise).', LIMITERS),
    Setting("MAX_JOBS", None,
            lambda v: v is None or _is_int(v, 1), "None or an integer >= 1",
            "A worker process stops fetching after starting this many jobs, finishes them and exits with status 0"
            " (a swarm child is replaced at once): recycles processes that leak memory. Ignored by embedded"
            " workers. Same as `manage.py wurk --max-jobs N`.", WORKER),
    Setting("HEALTH_PORT", None,
            lambda v: v is None or (_is_int(v, 1) and v < 65536), "None or a TCP port from 1 to 65535",
            "TCP port of the worker's HTTP probes: `GET /live` (200 while the process runs) and `GET /ready` (200"
            " while Redis answers and the process fetches). Same as `manage.py wurk --health-port PORT`; see"
            " [operations.md](operations.md).", WORKER),
    Setting("HEALTH_BIND", "127.0.0.1",
            lambda v: isinstance(v, str) and bool(v), "an IP address or host name",
            "Address the health port listens on. The loopback default answers probes from the same host or pod"
            " only; `\"0.0.0.0\"` (or `\"::\"`) listens on every interface, for a probe from another host.", WORKER),
    Setting("HISTORY", {},
            _history, "False or a dict of ROLLUP_INTERVAL (seconds, 0 off), SNAPSHOT_INTERVAL (None off) and"
            " STREAM_CAP (an integer >= 100)",
            'Historical metrics (the admin\'s Historical tab): `{"ROLLUP_INTERVAL": 60, "SNAPSHOT_INTERVAL": None,'
            ' "STREAM_CAP": 10000}`. Every `ROLLUP_INTERVAL` seconds one process (the leader) rolls throughput and'
            " queue size/latency up into 1 m / 5 m / 1 h buckets (kept 1 / 7 / 30 days; `0` stops it); every"
            " `SNAPSHOT_INTERVAL` seconds it appends the dashboard totals to the `history:metrics` stream (capped at"
            " about `STREAM_CAP` entries) and sends them as statsd gauges when `STATSD` is set. `False` turns all"
            " of it off. See [operations.md](operations.md).", FEATURES),
    Setting("STATSD", None,
            _statsd, "None, a client factory, or a dict of HOST, PORT (1-65535), TAGS (strings), NAMESPACE, CLIENT,"
            " OPTIONS",
            "Job metrics to statsd/DogStatsD with Sidekiq Pro's names (`sidekiq.jobs.count`, ...): `{\"HOST\":"
            ' "127.0.0.1", "PORT": 8125, "TAGS": ["env:prod"], "NAMESPACE": None}`, or `{"CLIENT":'
            ' "dotted.factory"}` (a callable returning an existing DogStatsD client), plus an optional `"OPTIONS":'
            ' fn(class, job, queue) -> {"tags": [...], "sample_rate": r}`. Sent over non-blocking UDP (dropped,'
            " never waited for). See [operations.md](operations.md).", FEATURES),
)

#: Every key the WURK dict may hold, with its default.
DEFAULTS: dict[str, Any] = {s.name: s.default for s in SETTINGS}
_BY_NAME: dict[str, Setting] = {s.name: s for s in SETTINGS}


def _periodic_shape(v: Any) -> bool:
    # The shape only; problems() adds what is wrong inside each entry (schedule, options).
    return isinstance(v, (list, tuple)) and all(isinstance(e, dict) and "cron" in e and "job" in e for e in v)


def periodic_problems(v: Any) -> list[str]:
    """What is wrong with ``WURK["PERIODIC"]``: its shape, then each entry (schedule, options)."""
    if not _periodic_shape(v):
        return [f"{v!r} is not a list of {{'cron': ..., 'job': ...}} dicts (see docs/periodic.md)"]
    from .periodic.config import entry_problems

    return list(entry_problems(v))


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
    if not is_queue_name(name):
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
        setting = _BY_NAME[key]
        if setting.detail is not None:
            detail = import_string(setting.detail)
            found.extend(Problem(key, message, kind=setting.kind) for message in detail(value))
        elif not setting.check(value):
            found.append(Problem(key, f"{value!r} is not {setting.want}", kind=setting.kind))
    if "QUEUES" in raw and isinstance(raw["QUEUES"], (list, tuple)):
        for spec in raw["QUEUES"]:
            try:
                parse_queue(spec)
            except ConfigurationError as exc:
                found.append(Problem("QUEUES", str(exc), kind="queue"))
    redis = raw.get("REDIS")
    if isinstance(redis, dict):
        found.extend(_redis_dict_problems(redis))
    env_url = os.environ.get("REDIS_URL")
    if not redis and not raw.get("REDIS_URL") and env_url and redis_url_problem(env_url):
        found.append(Problem("REDIS_URL", f"(from the REDIS_URL environment variable) {redis_url_problem(env_url)}"))
    found.extend(_shard_problems(raw))
    return found


def _redis_dict_problems(redis: dict[str, Any]) -> list[Problem]:
    found = [Problem("REDIS", message, kind="redis") for message in dict_problems(redis)]
    url = redis.get("URL")
    if isinstance(url, str) and "://" in url and redis_url_problem(url):
        # A scheme redis-py does not know, or a database that is not a number.
        found.append(Problem("REDIS", f"URL {redis_url_problem(url)}", kind="redis"))
    return found


def _shard_problems(raw: dict[str, Any]) -> list[Problem]:
    found = []
    shards = raw.get("SHARDS")
    if isinstance(shards, dict):
        for name, value in shards.items():
            if isinstance(value, str):
                if redis_url_problem(value):
                    found.append(Problem("SHARDS", f"{name!r}: {redis_url_problem(value)}", kind="redis"))
            elif isinstance(value, dict):
                found.extend(Problem("SHARDS", f"{name!r}: {m}", kind="redis") for m in dict_problems(value))
            else:
                found.append(Problem("SHARDS", f"{name!r}: {value!r} is neither a URL nor a dict", kind="redis"))
    else:
        shards = {}
    queue_shards = raw.get("QUEUE_SHARDS")
    if isinstance(queue_shards, dict):
        for queue, name in queue_shards.items():
            if isinstance(name, str) and name != "default" and name not in shards:
                found.append(Problem("QUEUE_SHARDS", f"queue {queue!r} names shard {name!r}, which is not in SHARDS",
                                     kind="redis"))
    return found


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
        self._set_target(resolve(values["REDIS"], fallback_url=redis_url(values)))
        #: The name of the shard this config points at (see :meth:`for_shard`).
        self.shard: str = "default"
        #: What :meth:`for_shard` was given (``None`` for the default Redis).
        self.shard_spec: str | dict[str, Any] | None = None
        self._root: Config | None = None
        self._shards: dict[str, Config] = {}
        hook = values["ON_REDIS_ERROR"]
        self.on_redis_error: Callable[[Any], Any] | None = _load(hook) if hook else None
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
        self.reliable_push_exit_wait: float = values["RELIABLE_PUSH_EXIT_WAIT"]
        self.fetch_poll_interval: float = values["FETCH_POLL_INTERVAL"]
        self.reaper_interval: float = values["SUPER_FETCH_REAPER_INTERVAL"]
        self.reaper_orphan_grace: float = values["REAPER_ORPHAN_GRACE"]
        self.testing: str | None = values["TESTING"]
        self.swarm: list[dict[str, Any]] | None = values["SWARM"]
        self.memory_limit_mb: float | None = values["MEMORY_LIMIT_MB"]
        self.swarm_heartbeat_timeout: float = float(values["SWARM_HEARTBEAT_TIMEOUT"] or 0)
        self.max_jobs: int | None = values["MAX_JOBS"]
        self.health_port: int | None = values["HEALTH_PORT"]
        self.health_bind: str = values["HEALTH_BIND"]

    def _set_target(self, target: RedisTarget) -> None:
        self.redis_target = target
        self.redis_url = target.url
        self.redis_options: dict[str, Any] = dict(target.options)
        self.redis_cache_alias: str | None = target.cache_alias

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


def _default_tag() -> str:
    from django.conf import settings

    # A worker built from a Config alone (no settings module) is named after its directory.
    base = getattr(settings, "BASE_DIR", None) if settings.configured else None
    return os.path.basename(str(base).rstrip("/")) if base else os.path.basename(os.getcwd())


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
    """The config for client-side calls, rebuilt whenever ``settings.WURK`` changes;
    inside a ``wurk_django.via()`` block, pointed at that block's Redis shard."""
    config = base_config()
    shard = VIA.get()
    return config if shard is None else config.for_shard(shard)


def reset_config(**kwargs: Any) -> None:
    global _cached
    _cached = None


# -- the table in docs/configuration.md -------------------------------------------------------

MARKDOWN_BEGIN = ("<!-- settings table: generated from SETTINGS in wurk_django/conf.py by "
                  "`python -m wurk_django.settings_doc`; edit the rows there, not here -->")
MARKDOWN_END = "<!-- end of the generated settings table -->"


def _shown(value: Any) -> str:
    """A default as a user writes it in settings.py (double quotes, no digit separators)."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_shown(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_shown(k)}: {_shown(v)}" for k, v in value.items()) + "}"
    return repr(value)


def markdown() -> str:
    """The settings tables of docs/configuration.md, one per section, between the two markers."""
    lines = [MARKDOWN_BEGIN]
    for section in dict.fromkeys(s.section for s in SETTINGS):
        lines += ["", f"### {section}", "", "| Key | Default | Meaning |", "|---|---|---|"]
        lines += [f"| `{s.name}` | `{_shown(s.default)}` | {s.doc.replace('|', chr(92) + '|')} |"
                  for s in SETTINGS if s.section == section]
    lines += ["", MARKDOWN_END]
    return "\n".join(lines) + "\n"

