"""The engine's own settings rows: Redis, the worker, retries, the client, logging,
the admin and the swarm supervisor.

A feature's rows live beside its code, in ``wurk_django/<feature>/settings.py``
(see :mod:`wurk_django.conf.table`). The swarm's rows stay here: its package
imports the whole worker engine, and every process reads this table.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ..errors import ConfigurationError
from ..payload import WireFormat
from .setting import ADMIN, CLIENT, LOGGING, REDIS, RETRIES, SWARM, WORKER, Setting
from .validators import (
    int_at_least,
    is_callables,
    is_int,
    is_middleware,
    is_number,
    load,
    load_all,
    parse_queue,
    redis_url_problem,
)

MODES = ("off", "standalone", "embedded", "swarm")

TESTING_MODES = (None, "disable", "fake", "inline")

#: Types of the typed reads, for ``Setting.type`` (an ``isinstance`` target).
NUMBER = int | float
HOOK = Callable | None


def _swarm_topology(v: Any) -> bool:
    if not isinstance(v, (list, tuple)) or not v:
        return False
    for slot in v:
        if not isinstance(slot, dict) or set(slot) - {"count", "queues", "concurrency"}:
            return False
        if not is_int(slot.get("count", 1), 1) or not is_int(slot.get("concurrency", 1), 1):
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


WIRE_FORMATS = (6, 7, 8, "sidekiq6", "sidekiq7", "sidekiq8")


def _wire_format(value: int | str) -> WireFormat:
    # Sidekiq 6 and 7 read the same timestamps; 6's busy table is written with either.
    return WireFormat(max(7, int(str(value).removeprefix("sidekiq"))))


def _queues(value: Any) -> list[tuple[str, int]]:
    return [parse_queue(q) for q in value]


def _capsules(value: Any) -> tuple:
    # Lazy: read only when the table is built, after the package is.
    from .capsules import parse_setting

    return parse_setting(value)


def _job_options(value: dict[str, Any]) -> dict[str, Any]:
    return {"retry": True, "queue": "default", **value}


def _seconds_or_off(value: Any) -> float:
    return float(value or 0)


def _tag(value: str | None) -> str:
    return value if value is not None else default_tag()


def default_tag() -> str:
    """The name of the project directory (``BASE_DIR``), else of the working directory."""
    from django.conf import settings

    # A worker built from a Config alone (no settings module) is named after its directory.
    base = getattr(settings, "BASE_DIR", None) if settings.configured else None
    return os.path.basename(str(base).rstrip("/")) if base else os.path.basename(os.getcwd())


ROWS: tuple[Setting, ...] = (
    # -- Redis --
    Setting("REDIS_URL", None,
            lambda v: v is None or redis_url_problem(v) is None, "a redis://host:port/<number> URL",
            "Redis server URL (`redis://`, `rediss://`, `unix://`). `None`: the `REDIS_URL` environment variable,"
            " else `redis://localhost:6379/0`. Another scheme, a bad port or a database that is not a number"
            " (`/abc`, `?db=x`) fails `manage.py check` and stops the worker with one line, the environment"
            " variable included.", REDIS,
            attribute=""),
    Setting("REDIS", None,
            lambda v: v is None or isinstance(v, dict) or redis_url_problem(v) is None,
            "a redis://host:port/<number> URL or a dict",
            "Richer form, wins over `REDIS_URL`: a URL string, or a dict with `URL`, `POOL_SIZE` (connections per"
            " pool, at least: see \"Redis server and connections\" below), `OPTIONS` (keyword arguments for redis-py: TLS, ACL user/password, timeouts...), or `CACHE` "
            "(the alias of a Redis cache in `settings.CACHES` whose server and connection options are reused, its"
            " django-redis `SENTINELS` form included; its `KEY_PREFIX` never applies to job keys), or `SENTINELS` "
            "(`[(host, port), ...]`) with `SERVICE` (the master name the sentinels watch) and optional "
            "`SENTINEL_OPTIONS` (redis-py arguments for the sentinels; `OPTIONS` are for the Redis servers, `db` "
            "included). Give one of `URL`, `CACHE` or `SENTINELS`. See docs/redis.md.", REDIS,
            attribute=""),
    Setting("SHARDS", {},
            lambda v: isinstance(v, dict) and all(isinstance(k, str) and k for k in v), "a dict of name: Redis",
            "Other Redis servers jobs can be pushed to, by name: each value a URL or a dict of the `REDIS` form. "
            "Push to one with `wurk_django.via(\"name\")`, `Job.set(shard=\"name\")`, a job class's `shard` "
            "attribute or `QUEUE_SHARDS`; run workers against one with `manage.py wurk --shard name`. The name "
            "`\"default\"` always means `REDIS`. See docs/redis.md.", REDIS,
            type=dict),
    Setting("QUEUE_SHARDS", {},
            lambda v: isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items()),
            "a dict of queue name: shard name",
            "Queue name to shard name (a key of `SHARDS`): jobs pushed to that queue go to that shard unless "
            "the push names a shard itself.", REDIS,
            type=dict),
    Setting("ON_REDIS_ERROR", None,
            lambda v: v is None or callable(v) or isinstance(v, str), "None, a callable or a dotted path",
            "Callable (or dotted path) called as `hook(event)` for every Redis error the write path retries, "
            "refuses to replay or gives up on; `event` has `error`, `attempt`, `retried`, `pool` and `action` "
            "(see docs/redis.md, Replay policy). A failing hook is logged and ignored.", REDIS,
            parse=load, type=HOOK),
    Setting("ALLOW_EVICTION", False,
            lambda v: isinstance(v, bool), "True or False",
            "Run on a Redis whose `maxmemory-policy` is not `noeviction`. Such a Redis at its `maxmemory` deletes "
            "keys, and a deleted queue, schedule or retry set loses its jobs without a trace: by default the worker "
            "refuses to start there (an error naming the policy, exit 1), `check --deploy` reports `wurk.E012` and "
            "the dashboard shows a banner. `True`: the worker starts (with a warning), and the check and banner are "
            "off; growing `evicted_keys` is still logged. See docs/redis.md, Eviction policies.", REDIS,
            type=bool),
    Setting("FAST_PATH", True,
            lambda v: isinstance(v, bool), "True or False",
            "Write the hot path's command batches and `redis_client()`'s single commands straight on the "
            "socket with hiredis (`wurk_django/redis/wire.py`). `False` sends them through redis-py's own calls: "
            "slower, same results; the environment variable `WURK_FAST_PATH=0` does the same and wins. Read "
            "once per process. An installed redis-py the fast path does not fit turns it off by itself, with "
            "one WARNING line. See docs/redis.md, The socket fast path.", REDIS, type=bool),
    Setting("WIRE_FORMAT", 8,
            lambda v: type(v) in (int, str) and v in WIRE_FORMATS, "6, 7 or 8 (or \"sidekiq6\", \"sidekiq7\", \"sidekiq8\")",
            "Which Sidekiq generation reads what this process writes. `8`: integer-millisecond `created_at`, "
            "`enqueued_at`, `failed_at`, `retried_at` (Sidekiq 8). `7` or `6` (the same format): float seconds "
            "there, as Sidekiq <= 7 reads them, and each worker's busy jobs in `<identity>:workers` (Sidekiq 6's "
            "Busy page) besides `<identity>:work`. Both units are always read. Set it on every Python process "
            "while any Sidekiq 6 or 7 app reads the same Redis; see docs/interop.md.", REDIS,
            parse=_wire_format, type=WireFormat),
    # -- Worker --
    Setting("CONCURRENCY", 5,
            *int_at_least(1),
            "Job threads per worker process (integer >= 1). Each runs one job at a time, so at most this many "
            "jobs run at once in the process (all of them when that many are waiting; nothing else limits it).",
            WORKER,
            type=int),
    # Kept so settings that still set it load: it switched the run gate, removed in issue 48 item 4
    # (it gained less than 10 % on every shape measured); checks.py warns while it is set (wurk.W044).
    Setting("GIL_GATE", None,
            lambda v: True, "anything (it is ignored)",
            "No longer has an effect: the run gate it switched was removed (it gained less than 10 % on "
            "every shape measured; docs/benchmarks.md, The run gate). Accepted so settings that set it still load; "
            "`manage.py check` warns (`wurk.W044`) while it is set. Delete it. See docs/worker.md, "
            "How many jobs run at once.", WORKER,
            attribute=""),
    Setting("QUEUES", ["default"],
            lambda v: isinstance(v, (list, tuple)) and len(v) > 0, "a non-empty list of queue specs",
            'Queues to fetch from, each `"name"` or `"name,weight"` (or `[name, weight]`). No weights: strict '
            "order, a queue is only read when all before it are empty. All weights 1: random order. Otherwise "
            "weighted random. Names may hold letters, digits, `_ : . -`.", WORKER,
            parse=_queues, type=list),
    Setting("CAPSULES", {},
            lambda v: isinstance(v, dict), "a dict of name: {'concurrency': N, 'queues': [...]}",
            "More thread pools in each worker process, beside the default one that `CONCURRENCY` and `QUEUES` "
            "shape: `{\"single\": {\"concurrency\": 1, \"queues\": [\"single\"]}}` runs the jobs of queue "
            "`single` one at a time while the default threads run the rest. Each capsule takes `concurrency` "
            "(integer >= 1) and `queues` (specs as in `QUEUES`, weights included); a queue belongs to one capsule. "
            "Same as `manage.py wurk --capsule single:1 single`; see docs/worker.md.", WORKER,
            detail="wurk_django.conf.capsules.problems", parse=_capsules, type=tuple),
    Setting("TIMEOUT", 25,
            lambda v: is_number(v) and v > 0, "a number of seconds > 0",
            "Shutdown grace: seconds running jobs get to finish after a stop request before they are pushed back "
            "to their queue. Keep it below your process manager's kill timeout.", WORKER,
            parse=float, type=float),
    Setting("POLL_INTERVAL_AVERAGE", None,
            lambda v: v is None or (is_number(v) and v > 0), "None or seconds > 0",
            "Fixed average seconds between polls of the `schedule` and `retry` sets. `None`: scaled by the number"
            " of live processes, so the cluster as a whole polls about every `AVERAGE_SCHEDULED_POLL_INTERVAL` "
            "seconds.", WORKER,
            type=NUMBER | None),
    Setting("AVERAGE_SCHEDULED_POLL_INTERVAL", 5,
            lambda v: is_number(v) and v > 0, "seconds > 0",
            "The cluster-wide poll average used when `POLL_INTERVAL_AVERAGE` is `None`.", WORKER,
            type=NUMBER),
    Setting("FETCH_CLASS", None,
            lambda v: v is None or isinstance(v, str) or callable(v), "a dotted path",
            "Dotted path of a fetcher class replacing the built-in one. `None`: reliable fetch - each fetched job"
            " is moved to a private per-process list until it finishes, so a crashed worker's jobs are recovered.", WORKER,
            parse=load, type=HOOK),
    Setting("FETCH_POLL_INTERVAL", 2,
            lambda v: is_number(v) and v > 0, "seconds > 0",
            "Seconds a fetcher blocks waiting on an empty queue before looking again (and noticing paused "
            "queues). With several queues (or one, at `-c 1`) and `FETCH_NOTIFICATIONS` working, idle threads "
            "look again only every 15 intervals: Redis tells them about pushes.", WORKER,
            type=NUMBER),
    Setting("FETCH_SIZE", 16,
            *int_at_least(0),
            "Most jobs a thread moves from a busy queue in one round trip (fetching ahead, while its recent jobs "
            "are short). `0` or `1`: one job per fetch, as Sidekiq does. A thread whose current job runs past 5 ms "
            "hands the jobs it holds ahead back to their queue, so they never wait behind a long job; see "
            "docs/reliability.md.", WORKER,
            type=int),
    Setting("FETCH_NOTIFICATIONS", True,
            lambda v: isinstance(v, bool), "True or False",
            "Idle threads serving several queues (or one, at `-c 1`) are told by Redis (`CLIENT TRACKING`) when any "
            "client writes one of their queues, so a job pushed by Ruby Sidekiq or a bare `LPUSH` starts at once. "
            "`False`, or a Redis that refuses `CLIENT TRACKING` (logged once): several queues are polled, every "
            "`FETCH_POLL_INTERVAL`, and one queue is blocked on.", WORKER),
    Setting("SUPER_FETCH_REAPER_INTERVAL", 60,
            lambda v: is_number(v) and v > 0, "seconds > 0",
            "Seconds between sweeps that bring back jobs left in the private lists of processes that died.", WORKER,
            attribute="reaper_interval", type=NUMBER),
    Setting("REAPER_ORPHAN_GRACE", 30,
            lambda v: is_number(v) and v >= 0, "seconds >= 0 (0 disables)",
            "Seconds a dead-looking process's private list must stay untouched before the reaper takes its jobs "
            "back, so a worker that is still booting is left alone. `0` disables the grace.", WORKER,
            type=NUMBER),
    Setting("RECOVERY_CALLBACK", None,
            lambda v: v is None or callable(v) or isinstance(v, str), "None, a callable or a dotted path",
            "Callable (or dotted path) called as `callback(job_string, pill)` in the process that reaps: for "
            "every job given back from a dead process's private list (`pill` is `None`), and for every poison "
            "pill once buried (`pill` a `wurk_django.server.poison.Pill`, with `dead_score`). Sidekiq Pro's "
            "`super_fetch!` block; `wurk_django.server.poison.super_fetch(callback)` sets one in code. A failing "
            "callback is logged and the recovery goes on. See docs/reliability.md.", WORKER,
            parse=load, type=HOOK),
    Setting("REVOKE_GRACE", 10,
            lambda v: is_number(v) and v >= 0, "seconds >= 0",
            "Seconds a running job stopped by `revoke(..., terminate=True)` (or the Busy page's Stop) has, after "
            "the soft stop is raised in its thread, before its thread is abandoned and replaced (the hard stop). "
            "See docs/time-limits.md.", WORKER,
            type=NUMBER),
    Setting("ABANDONED_THREADS_LIMIT", None,
            lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
            "None or an integer >= 1",
            "Job threads a worker process may have abandoned (a hard time limit, a revoke's grace) and still "
            "stuck (each capsule counts its own) before it restarts itself: past it, the worker logs why, stops cleanly (exit 0, so its "
            "supervisor or swarm starts a fresh process) and `/live` fails. `None`: the larger of the "
            "capsule's concurrency and 16. See docs/time-limits.md.", WORKER,
            type=int | None),
    Setting("MODE", "off",
            lambda v: v in MODES, " or ".join(f'"{m}"' for m in MODES),
            'Where a worker runs besides `manage.py wurk`: `"off"` (only the command), `"standalone"`, '
            '`"embedded"` (worker threads inside the web server process) or `"swarm"` (forked children). See '
            "docs/worker.md and docs/embedded.md.", WORKER,
            type=str),
    Setting("EMBEDDED_CONCURRENCY", 2,
            *int_at_least(1),
            'Job threads each web process runs when `MODE` is `"embedded"`. See docs/embedded.md.', WORKER,
            type=int),
    Setting("TAG", None,
            lambda v: v is None or isinstance(v, str), "a string",
            "Label shown for the process in the Web UI. `None`: the name of the project directory (`BASE_DIR`).", WORKER,
            parse=_tag, type=str),
    Setting("LABELS", [],
            lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v), "a list of strings",
            "Extra strings shown next to the process in the Web UI.", WORKER,
            parse=list, type=list),
    Setting("AUTODISCOVER", ["jobs", "tasks"],
            lambda v: isinstance(v, (list, tuple)), "a list of module names",
            "Module names imported from every installed app when a worker starts, so job classes are registered "
            "before the first fetch.", WORKER,
            parse=list, type=list),
    Setting("IMPORT_ON_MISS", None,
            lambda v: v is None or isinstance(v, (list, tuple)), "None or a list of module prefixes",
            "Module prefixes from which a job module may be imported when a payload names a class that is not "
            "registered yet. `None`: the installed apps' packages. A payload never causes an import outside these"
            " prefixes, and what it finds must be a registered job.", WORKER,
            type=list | tuple | None),
    Setting("MAX_JOBS", None,
            lambda v: v is None or is_int(v, 1), "None or an integer >= 1",
            "A worker process stops fetching after starting this many jobs, finishes them and exits with status 0"
            " (a swarm child is replaced at once): recycles processes that leak memory. Ignored by embedded"
            " workers. Same as `manage.py wurk --max-jobs N`.", WORKER,
            type=int | None),
    Setting("HEALTH_PORT", None,
            lambda v: v is None or (is_int(v, 1) and v < 65536), "None or a TCP port from 1 to 65535",
            "TCP port of the worker's HTTP probes: `GET /live` (200 while the process runs and is not quiet) and `GET /ready` (200"
            " while Redis answers and the process fetches). Same as `manage.py wurk --health-port PORT`; see"
            " [operations.md](operations.md).", WORKER,
            type=int | None),
    Setting("HEALTH_BIND", "127.0.0.1",
            lambda v: isinstance(v, str) and bool(v), "an IP address or host name",
            "Address the health port listens on. The loopback default answers probes from the same host or pod"
            " only; `\"0.0.0.0\"` (or `\"::\"`) listens on every interface, for a probe from another host.", WORKER,
            type=str),
    # -- Retries and the dead set --
    Setting("MAX_RETRIES", 25,
            *int_at_least(0),
            "How many retries `retry: True` means (about 20 days with the default back-off).", RETRIES,
            type=int),
    Setting("DEAD_MAX_JOBS", 10_000,
            *int_at_least(1),
            "Size cap of the dead set; older entries are trimmed when a job dies.", RETRIES,
            type=int),
    Setting("DEAD_TIMEOUT_IN_SECONDS", 180 * 24 * 3600,
            *int_at_least(1),
            "Age cap of the dead set (180 days).", RETRIES,
            attribute="dead_timeout", type=int),
    Setting("ERROR_HANDLERS", [],
            is_callables, "a list of callables or dotted paths",
            "Callables (or dotted paths) called as `handler(exc, context, config)` for every failed job attempt, "
            "after the built-in logging. Use them to report to an error tracker. A failing handler is logged; the"
            " others still run.", RETRIES,
            parse=load_all, type=list),
    Setting("DEATH_HANDLERS", [],
            is_callables, "a list of callables or dotted paths",
            "Callables (or dotted paths) called as `handler(job, exc)` whenever a job dies: retries exhausted, "
            "discarded, `retry: False`, poison pill, invalid payload, a due job the scheduler could not push, or a "
            "kill from the admin or the API (then `exc` is a `wurk_django.death.JobKilled`).", RETRIES,
            parse=load_all, type=list),
    Setting("BACKTRACE_CLEANER", None,
            lambda v: v is None or callable(v) or isinstance(v, str), "a callable or dotted path",
            "Callable (or dotted path) taking and returning the list of backtrace lines stored with `backtrace: "
            "True` jobs, e.g. to drop framework frames.", RETRIES,
            parse=load, type=HOOK),
    # -- Client --
    Setting("DEFAULT_JOB_OPTIONS", {"retry": True, "queue": "default"},
            lambda v: isinstance(v, dict), "a dict",
            "Options under every push; class options and `set()` override them. Also what a job pushed by name "
            "only (a Ruby class) gets.", CLIENT,
            parse=_job_options, type=dict),
    Setting("ON_COMPLEX_ARGUMENTS", "raise",
            lambda v: v in ("raise", "warn", False), '"raise", "warn" or False',
            'What a push does with an argument that is not plain JSON: `"raise"` a `ValueError` naming it, '
            '`"warn"` (log, then convert tuples to lists and anything else to `str`), or `False` (convert '
            "silently). See [jobs.md](jobs.md#arguments).", CLIENT,
            type=str | bool),
    Setting("CLIENT_MIDDLEWARE", [],
            is_middleware, "a list of middleware classes or dotted paths",
            "Middleware run around every push, outermost first: classes or dotted paths, or `(class, {kwargs})` "
            "pairs.", CLIENT,
            parse=list, type=list),
    Setting("SERVER_MIDDLEWARE", [],
            is_middleware, "a list of middleware classes or dotted paths",
            "Middleware run around every job execution (and by `perform_inline`), same forms.", CLIENT,
            parse=list, type=list),
    Setting("ENQUEUE_ON_COMMIT", None,
            lambda v: v is None or isinstance(v, bool), "None, True or False",
            "Push inside a database transaction only once it commits (nothing is pushed on rollback). Per call: "
            '`set(on_commit=True)` or `set(on_commit="alias")` for another database. `perform_bulk` is '
            "deferred too (its jids are returned at once). `None`: each door's own default, which is at once "
            "for jobs and at commit for `django.tasks` (the backend's `OPTIONS[\"ENQUEUE_ON_COMMIT\"]` wins "
            "over this setting).", CLIENT,
            type=bool | None),
    Setting("TRANSACTIONAL_PUSH", None,
            lambda v: v is None or isinstance(v, bool), "None, True or False",
            "Another name for `ENQUEUE_ON_COMMIT` (after Sidekiq's `transactional_push!`): `True` turns it on "
            "whichever of the two says so.", CLIENT,
            attribute=""),
    Setting("MAX_ITERATION_RUNTIME", None,
            lambda v: v is None or (is_number(v) and v > 0), "None or seconds > 0",
            "Seconds an iterable job (`wurk_django.iterable.IterableJob`) runs before it saves its cursor and "
            "re-queues itself; `None` runs until done or until the worker stops.", CLIENT,
            type=NUMBER | None),
    Setting("RELIABLE_PUSH", True,
            lambda v: isinstance(v, bool), "True or False",
            "When Redis is unreachable, keep pushed jobs in an in-memory buffer (per process) and let a "
            "background thread deliver them, oldest first, once Redis answers; later pushes deliver the backlog "
            "first. Jobs of a batch (`bid`) are never buffered. A push whose reply was lost may arrive twice "
            "(docs/reliability.md). `False`: a push raises `redis.ConnectionError` at the call site instead. On by "
            "default because a web request should not fail on a Redis blip; a script that must know at once (a "
            "cron job whose exit status matters) sets it to `False`.", CLIENT,
            type=bool),
    Setting("RELIABLE_PUSH_EXIT_WAIT", 5,
            lambda v: is_number(v) and 0 <= v <= 300, "seconds from 0 to 300",
            "Seconds a process that exits with jobs still buffered keeps retrying Redis; every job still "
            "undelivered then is saved to `RELIABLE_PUSH_SPOOL` (one ERROR line says how many and where), or, "
            "without a spool, logged by jid at ERROR (on stderr when logging is not configured) with exit status "
            "75: never lost without a word.", CLIENT,
            type=NUMBER),
    Setting("RELIABLE_PUSH_SPOOL", True,
            lambda v: isinstance(v, bool) or (isinstance(v, (str, os.PathLike)) and bool(os.fspath(v))),
            "True, False or a folder path",
            "Where a process that exits with buffered jobs still undelivered after `RELIABLE_PUSH_EXIT_WAIT` "
            "saves them, one file per process, for the next process that pushes to the same Redis (at its first "
            "push, then at most once a minute) or the next worker (at boot, then once a minute) to push, each "
            "file once. `True`: `wurk_django-push-spool-<uid>` in the system's temporary directory; a path: that "
            "folder (created `0700`; refused if every user may write to it), ideally one that outlives a reboot "
            "and that the web processes and the workers of a host share. `False`: no spool; undelivered jobs are "
            "logged by jid and the process exits with status 75 (docs/reliability.md).", CLIENT,
            type=bool | str | os.PathLike),
    Setting("RELIABLE_PUSH_BUFFER", 1000,
            *int_at_least(1),
            "How many jobs that buffer holds; what a push that does not fit does is `RELIABLE_PUSH_OVERFLOW`'s "
            "choice.", CLIENT,
            type=int),
    Setting("RELIABLE_PUSH_OVERFLOW", "raise",
            lambda v: v in ("raise", "drop_oldest"), '"raise" or "drop_oldest"',
            "What a push does when the buffer is full: `\"raise\"` fills the room left and raises "
            "`wurk_django.client.reliable_push.PushBufferFull` at the call site naming the jobs it did not take "
            "(`.jobs`); "
            "`\"drop_oldest\"` keeps it and drops the oldest buffered jobs to make room (a ring), each logged by "
            "jid at ERROR and sent with the `pushes_dropped` signal. Never silent either way.", CLIENT,
            type=str),
    Setting("PUSH_SPIN_US", 100,
            lambda v: is_int(v, 0) and v <= 10_000, "an integer from 0 to 10000",
            "Microseconds a push polls the socket for Redis's reply before it sleeps in the kernel until the "
            "reply comes. Waking a sleeping thread costs tens of microseconds on a VM, as much as a round trip to "
            "a local Redis (docs/benchmarks.md#enqueue-one-job-at-a-time); a connection whose replies come later "
            "than this (Redis across a network) soon stops polling, and a process that runs a worker (`manage.py "
            "wurk`, embedded mode) never polls: its threads would hand the GIL to each other at every try. `0` "
            "turns it off.", CLIENT,
            type=int),
    Setting("TESTING", None,
            lambda v: v in TESTING_MODES, 'None, "disable", "fake" or "inline"',
            'For test suites: `"fake"` records pushes in memory instead of Redis, `"inline"` runs them at once, '
            '`None`/`"disable"` pushes for real.', CLIENT,
            type=str | None),
    # -- Logging --
    Setting("LOG_FORMAT", "plain",
            lambda v: v in ("plain", "json"), '"plain" or "json"',
            'Worker log lines as `"plain"` text or `"json"` (one object per line).', LOGGING,
            type=str),
    Setting("LOG_FLUSH_INTERVAL", 0.1,
            lambda v: is_number(v) and 0 <= v <= 10, "seconds from 0 to 10 (0: write each line at once)",
            "Seconds INFO lines wait to be written together by the worker's log writer (0 to 10; `0` writes each "
            "line at once). WARNING and above are always written at once. See docs/worker.md, Logging.", LOGGING,
            parse=float, type=float),
    Setting("VERBOSE", False,
            lambda v: isinstance(v, bool), "True or False",
            "Debug-level worker logging.", LOGGING,
            type=bool),
    Setting("ENVIRONMENT", None,
            lambda v: v is None or isinstance(v, str), "a string",
            'Environment name (`"development"`, `"production"`...); in development failed jobs log their full '
            "traceback. `None`: development exactly when Django's `DEBUG` is true.", LOGGING,
            type=str | None),
    Setting("LOGGED_JOB_ATTRIBUTES", ["bid", "tags"],
            lambda v: isinstance(v, (list, tuple)), "a list of payload keys",
            "Payload keys added to the log context of each job's lines.", LOGGING,
            parse=list, type=list),
    Setting("SKIP_DEFAULT_JOB_LOGGING", False,
            lambda v: isinstance(v, bool), "True or False",
            'Drop the built-in "start"/"done"/"fail" line per job (your middleware logs instead).', LOGGING,
            type=bool),
    # -- Admin dashboard --
    Setting("ADMIN_READ_ONLY", False,
            lambda v: isinstance(v, bool), "True or False",
            "The dashboard in the Django admin shows data only: no buttons, every POST refused.", ADMIN,
            type=bool),
    Setting("ADMIN_AUTHORIZE", None,
            lambda v: v is None or callable(v) or isinstance(v, str), "None, a callable or a dotted path",
            "Callable (or dotted path) `(request, method, path) -> bool` asked last for every dashboard request, "
            "the `API_TOKEN` ones included (`request.wurk_api_token` is `True` for those), on top of the admin"
            " permissions; `False` refuses (403).", ADMIN,
            type=HOOK | str),
    Setting("API_TOKEN", None,
            lambda v: v is None or (isinstance(v, str) and len(v) >= 16), "None or a string of 16+ characters",
            "Bearer token (16 characters or more) for the stats JSON, queue sizes JSON and Prometheus endpoints,"
            " and nothing else (never a page, a workflow's or a batch's JSON); `None` leaves them to logged-in"
            " staff only.", ADMIN,
            type=str | None),
    # -- Swarm --
    Setting("SWARM", None,
            lambda v: v is None or _swarm_topology(v), "None or a list of {count, queues, concurrency} dicts",
            'Topology for `manage.py wurk` as a swarm: a list of `{"count": n, "queues": [...], "concurrency": '
            "c}` slots, each forked `count` times with those queues and threads. Setting it makes `manage.py "
            "wurk` supervise a swarm (`--processes 0` runs one process instead). See [swarm.md](swarm.md).", SWARM,
            type=list | tuple | None),
    Setting("MEMORY_LIMIT_MB", None,
            lambda v: v is None or (is_number(v) and v >= 0), "None or megabytes >= 0 (0 disables)",
            "RSS cap per swarm child in MB; a child at or over it is replaced gracefully (new child first, then "
            "the old one drains). `None`: the `WURK_MAXMEM_MB` (or `SIDEKIQ_MAXMEM_MB`) environment variable; `0`"
            " disables. Linux only.", SWARM,
            type=NUMBER | None),
    Setting("SWARM_HEARTBEAT_TIMEOUT", 60,
            lambda v: v is False or (is_number(v) and (v == 0 or v >= 20)), "seconds >= 20, or 0/False to disable",
            "Seconds a swarm child's heartbeat may stand still before the supervisor replaces it (at least 20); "
            "`0` or `False` disables.", SWARM,
            parse=_seconds_or_off, type=float),
)
