"""System checks for ``settings.WURK`` (DJ-004), run by ``manage.py check``.

The ordinary checks only read settings. Talking to Redis (version,
eviction policy) happens only under ``check --deploy``.

Ids:

* ``wurk.E001`` unknown key; ``wurk.E002`` wrong type or impossible value;
  ``wurk.E003`` bad queue spec; ``wurk.E004`` bad ``REDIS`` dict;
  ``wurk.E005`` ``REDIS["CACHE"]`` cannot be used; ``wurk.E006`` ``WURK`` is
  not a dict; ``wurk.E007`` bad ``ENCRYPTION`` (a key that is not base64 of
  exactly 32 bytes, an active version without a key...), never quoting a key;
* ``wurk.E041`` bad ``HTTP_API_TOKENS`` (a token without scopes, shorter than
  16 characters, two names with one token...), never quoting a token;
* ``wurk.W042`` a token of ``HTTP_API_TOKENS`` has the ``enqueue`` scope while
  ``HTTP_API_JOB_CLASSES`` is empty (every push it makes is refused);
  ``wurk.W043`` ``QUEUE_LIMITS`` is set while ``FETCH_CLASS`` is ``BasicFetch``
  (a worker serving a capped queue refuses to start; a warning, since a web
  process never fetches);
* ``wurk.W044`` a key that no longer has an effect is set (``GIL_GATE``: the run
  gate was removed in issue 48 item 4);
* ``wurk.E020`` a ``PERIODIC`` entry is malformed (schedule, options);
  ``wurk.W021`` a periodic job class cannot be found (a warning: it stops the
  worker's periodic loop, not ``migrate``); ``wurk.W020`` a periodic time zone
  is unknown (the loop would run on UTC);
* ``wurk.E023`` ``TASKS`` names ``WurkBackend`` but no Tasks framework is
  installed (Django < 6.0 without the ``django-tasks`` backport);
  ``wurk.W023`` the backport is in use but ``django_tasks`` is not in
  ``INSTALLED_APPS`` (its app registers the checks that run
  ``WurkBackend.check()``, so ``wurk.E030``-``E032`` would never be reported);
* from ``WurkBackend.check()`` (wurk_django/tasks/backend.py): ``wurk.E030`` an
  unknown ``OPTIONS`` key, ``wurk.E031`` a bad ``OPTIONS`` value, ``wurk.E032`` a
  queue name wurk cannot use;
* deploy only: ``wurk.E010`` Redis older than 7.0, ``wurk.E011`` Redis Cluster with a
  feature switched on that the worker refuses there, ``wurk.W013`` Redis Cluster (its own layout, no
  Ruby Sidekiq there),
  ``wurk.E012`` eviction policy is not ``noeviction`` and ``ALLOW_EVICTION`` is not
  True (the worker would refuse to start; issue 43 item 3), ``wurk.W012`` the server
  does not tell its eviction policy, ``wurk.W011`` Redis unreachable. (``wurk.W010``,
  the eviction warning before ``E012``, is no longer raised.)
"""

from __future__ import annotations

from typing import Any

import redis as redis_lib
from django.core import checks

from . import conf, context
from .errors import ConfigurationError
from .redis.connection import MIN_VERSION, eviction_policy, probe_redis, server_version
from .redis.eviction import evicting, refusal, unknown_policy

_IDS = {"unknown": "wurk.E001", "value": "wurk.E002", "queue": "wurk.E003", "redis": "wurk.E004",
        "encryption": "wurk.E007",
        "periodic": "wurk.E020", "http_api": "wurk.E041"}


def check_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Validate ``settings.WURK`` without network I/O."""
    try:
        raw = conf.raw_settings()
    except ConfigurationError as exc:
        return [checks.Error(str(exc), hint="settings.WURK = {...}", id="wurk.E006")]
    messages: list[checks.CheckMessage] = []
    found = conf.problems(raw)
    for problem in found:
        messages.append(checks.Error(
            f"WURK[{problem.key!r}]: {problem.message}",
            hint=problem.hint or _hint_for(problem.key),
            obj="settings.WURK",
            id=_IDS.get(problem.kind, "wurk.E002"),
        ))
    redis = raw.get("REDIS")
    redis_ok = not any(p.kind == "redis" for p in found)
    if redis_ok and isinstance(redis, dict) and isinstance(redis.get("CACHE"), str) and redis["CACHE"]:
        try:
            conf.cache_redis_params(redis["CACHE"])
        except ConfigurationError as exc:
            messages.append(checks.Error(
                str(exc),
                hint="point CACHE at a django-redis or django.core.cache.backends.redis cache, or give URL",
                obj="settings.WURK",
                id="wurk.E005",
            ))
    return messages


def check_feature_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Settings each valid alone that do nothing (or stop a worker) together (issue 47)."""
    try:
        config = context.config()
    except ConfigurationError:
        return []  # check_settings reports it
    messages: list[checks.CheckMessage] = []
    if not config.http_api_job_classes:
        for name, token in config.http_api_tokens.items():
            if "enqueue" in token.scopes:
                messages.append(checks.Warning(
                    f"HTTP API token {name!r} has the 'enqueue' scope, but WURK['HTTP_API_JOB_CLASSES'] is "
                    "empty: every push it makes is refused (403 class-not-allowed)",
                    hint="list the job classes the API may enqueue in HTTP_API_JOB_CLASSES, or drop the scope",
                    obj="settings.WURK", id="wurk.W042"))
    if config.queue_limits and config.fetch_class is not None:
        from .server.fetch.basic import BasicFetch

        if isinstance(config.fetch_class, type) and issubclass(config.fetch_class, BasicFetch):
            messages.append(checks.Warning(
                f"WURK['QUEUE_LIMITS'] caps {', '.join(sorted(config.queue_limits))}, but FETCH_CLASS is "
                "BasicFetch, whose BRPOP cannot take a slot with the job: a worker serving a capped queue "
                "refuses to start",
                hint="leave FETCH_CLASS unset (reliable fetch) to use QUEUE_LIMITS; see docs/queues.md",
                obj="settings.WURK", id="wurk.W043"))
    return messages


#: Keys still accepted (settings that set them load) that no longer do anything: why.
RETIRED = {
    "GIL_GATE": "the run gate it switched was removed (issue 48 item 4: it gained less than 10 % on every "
                "shape measured); a worker runs up to CONCURRENCY jobs at once, one a thread",
}


def check_retired_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Keys of ``settings.WURK`` that are still accepted but no longer have an effect."""
    try:
        raw = conf.raw_settings()
    except ConfigurationError:
        return []  # check_settings reports it
    return [checks.Warning(f"WURK[{key!r}] no longer has an effect: {why}",
                           hint=f"delete WURK[{key!r}] (docs/worker.md, How many jobs run at once)",
                           obj="settings.WURK", id="wurk.W044")
            for key, why in RETIRED.items() if key in raw]


def _hint_for(key: str) -> str:
    if key in conf.DEFAULTS:
        return f"the default is {conf.DEFAULTS[key]!r}"
    return ""


def _on_cluster(config: Any) -> list[checks.CheckMessage]:
    """A Redis Cluster node (issue 46): the worker runs its core features there, so the
    error ``wurk.E011`` only when the settings switch on one it would refuse at boot;
    else the warning ``wurk.W013`` saying that the cluster layout is not Sidekiq's."""
    from .conf.validation import raw_settings
    from .redis import cluster
    from .server import cluster_boot

    refused = cluster_boot.refusal(raw_settings(), config)
    if refused:
        return [checks.Error(refused, obj="settings.WURK", id="wurk.E011")]
    return [checks.Warning(
        f"Redis at {cluster.shown(config.redis_url)} is a Redis Cluster node: wurk_django runs there in its "
        f"cluster layout (queues spread over the primaries, Sidekiq's keys are not used, so Ruby Sidekiq "
        f"processes cannot share it); a custom FETCH_CLASS is refused there, see {cluster.DOCS}",
        obj="settings.WURK", id="wurk.W013")]


def check_redis_server(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Deploy-only: the configured Redis is reachable, >= 7.0, a cluster only for what runs there, and does not
    evict keys (unless ``ALLOW_EVICTION`` says it may)."""

    from .redis.connection import cluster_enabled

    if check_settings():
        return []  # the settings themselves are wrong; the errors above say how
    try:
        config = context.config()
        client = probe_redis(config, timeout=2)
        try:
            if cluster_enabled(client):
                return _on_cluster(config)
            version = server_version(client)
            policy = eviction_policy(client)
        finally:
            client.connection_pool.disconnect()
    except (redis_lib.RedisError, OSError, ConfigurationError) as exc:
        return [checks.Warning(f"cannot reach Redis to check it: {exc}", obj="settings.WURK", id="wurk.W011")]
    messages: list[checks.CheckMessage] = []
    if version < MIN_VERSION:
        messages.append(checks.Error(
            f"Redis {'.'.join(map(str, version))} is too old; wurk_django needs 7.0 or newer",
            obj="settings.WURK", id="wurk.E010",
        ))
    if policy is None:
        messages.append(checks.Warning(
            unknown_policy(config.redis_url),
            hint="ask your Redis provider for maxmemory-policy noeviction",
            obj="settings.WURK", id="wurk.W012",
        ))
    elif evicting(policy) and not config.allow_eviction:
        messages.append(checks.Error(
            refusal(policy, config.redis_url),
            hint="set maxmemory-policy noeviction on the Redis that holds jobs, or WURK['ALLOW_EVICTION'] = True",
            obj="settings.WURK", id="wurk.E012",
        ))
    return messages


def check_periodic(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """Periodic jobs: every class a ``PERIODIC`` entry or a ``periodic.register`` call names
    exists, and every time zone is known. (Malformed entries are ``check_settings``'s.)"""
    from . import conf
    from .periodic.config import build_loop, entry_loop, resolve_job, zone_warnings
    from .periodic.registration import code_registrations
    from .periodic.settings import is_shape

    try:
        entries = conf.raw_settings().get("PERIODIC") or []
    except ConfigurationError:
        return []
    if not is_shape(entries) or conf.problems():
        return []  # check_settings reports those; resolving classes needs valid settings
    messages: list[checks.CheckMessage] = []
    loops = []
    for index, entry in enumerate(entries):
        try:
            loops.append((f"WURK['PERIODIC'] entry {index}", entry_loop(entry)))
        except ValueError:
            continue  # reported by check_settings
    for cron, job, tz, options in code_registrations():
        try:
            loops.append((f"periodic.register({cron!r}, {job!r})", build_loop(cron, job, tz, options)))
        except ValueError as exc:
            messages.append(checks.Error(str(exc), obj="periodic.register", id="wurk.E020"))
    if loops:
        # The worker imports these modules before it looks for the classes; so does the
        # check, or a job named by its registered `name` would never be found here.
        from django.utils.module_loading import autodiscover_modules

        for module in conf.base_config().autodiscover:
            autodiscover_modules(module)
    for where, loop in loops:
        try:
            resolve_job(loop.klass)
        except ValueError as exc:
            # A warning, not an error: it concerns the worker only, and an error would
            # stop `migrate` and every other command of the project.
            messages.append(checks.Warning(
                f"{where}: {exc}", hint="name a Job subclass by its dotted path or its `name`",
                obj="settings.WURK", id="wurk.W021"))
    for message in zone_warnings(entries):
        messages.append(checks.Warning(f"WURK['PERIODIC'] {message}", hint="use an IANA name like 'Europe/Paris'",
                                       obj="settings.WURK", id="wurk.W020"))
    return messages


def check_tasks_framework(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A ``TASKS`` entry naming ``WurkBackend`` has a Tasks framework under it: Django's own
    (6.0+), or the ``django-tasks`` backport with its app installed."""
    from django.apps import apps
    from django.conf import settings

    tasks = getattr(settings, "TASKS", None)  # Django 5.2 has no default TASKS
    if not isinstance(tasks, dict):
        return []
    ours = [alias for alias, params in tasks.items()
            if isinstance(params, dict) and str(params.get("BACKEND", "")).startswith("wurk_django.tasks")]
    if not ours:
        return []
    from .tasks import compat

    obj = f"TASKS[{ours[0]!r}]"
    if not compat.AVAILABLE:
        return [checks.Error(
            f"{obj} names {tasks[ours[0]]['BACKEND']}, but this Django has no django.tasks (Django 6.0+) "
            "and the django-tasks backport is not installed",
            hint=f'pip install "wurk-django[tasks]" and add "{compat.BACKPORT_APP}" to INSTALLED_APPS',
            obj=obj, id="wurk.E023")]
    if compat.SOURCE == "django_tasks" and not apps.is_installed(compat.BACKPORT_APP):
        # The backend works without it; what is lost is the backport's check registration,
        # so a bad OPTIONS or queue name would only show up at enqueue or in the worker.
        return [checks.Warning(
            f"{obj} runs on the django-tasks backport, but {compat.BACKPORT_APP!r} is not in INSTALLED_APPS: "
            "the backport registers its system checks (and so WurkBackend's) from its app",
            hint=f'add "{compat.BACKPORT_APP}" to INSTALLED_APPS', obj=obj, id="wurk.W023")]
    return []


def check_celery_settings(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """A Celery project's ``CELERY_*`` settings: what wurk does with each (wurk_django.celery.checks)."""
    from .celery.checks import check_celery_settings as check

    return check(app_configs, **kwargs)


def register() -> None:
    checks.register(check_settings, "wurk")
    checks.register(check_feature_settings, "wurk")
    checks.register(check_retired_settings, "wurk")
    checks.register(check_celery_settings, "wurk")
    checks.register(check_tasks_framework, "wurk")
    checks.register(check_periodic, "wurk")
    checks.register(check_redis_server, "wurk", deploy=True)
