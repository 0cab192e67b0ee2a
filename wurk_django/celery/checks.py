"""``manage.py check`` for a Celery project's settings: each ``CELERY_*`` setting wurk does
not read is named with what happens to it (``wurk.W030``), and ``CELERY_BEAT_SCHEDULE``
entries that cannot become periodic loops are errors (``wurk.E040``)."""

from __future__ import annotations

from typing import Any

from . import django_settings as celery_settings

#: What becomes of the ``CELERY_*`` settings wurk does not read (without the prefix).
NOT_READ = {
    "BROKER_URL": "wurk's broker is its Redis: set WURK['REDIS_URL'] (docs/configuration.md)",
    "BROKER_TRANSPORT_OPTIONS": "Redis connection options go in WURK['REDIS']['OPTIONS']",
    "BROKER_CONNECTION_RETRY_ON_STARTUP": "a wurk worker retries Redis at boot on its own",
    "BROKER_CONNECTION_RETRY": "a wurk worker retries Redis on its own",
    "BROKER_POOL_LIMIT": "set WURK['REDIS']['POOL_SIZE']",
    "RESULT_BACKEND": "results are kept in wurk's Redis (status:<jid> records) for every task "
                      "without ignore_result=True",
    "RESULT_EXTENDED": "a result record always keeps the task's name",
    "RESULT_SERIALIZER": "results are JSON",
    "TASK_SERIALIZER": "payloads are JSON",
    "ACCEPT_CONTENT": "payloads are JSON",
    "ENABLE_UTC": "wurk stores times as UTC epochs; CELERY_TIMEZONE is the zone of beat entries",
    "TASK_TRACK_STARTED": "a result always reads STARTED while its task runs",
    "TASK_ACKS_LATE": "a wurk job is always acknowledged after it ran and put back when its worker dies",
    "TASK_REJECT_ON_WORKER_LOST": "a job whose worker dies is put back on its queue",
    "TASK_IGNORE_RESULT": "set ignore_result=True on each task",
    "TASK_ANNOTATIONS": "set the options on each @shared_task",
    "TASK_DEFAULT_RATE_LIMIT": "set rate_limit on each task (a limiter shared by the cluster)",
    "TASK_CREATE_MISSING_QUEUES": "wurk queues exist as soon as a job is pushed to them",
    "TASK_QUEUES": "a worker serves the queues given by manage.py wurk -q (WURK['QUEUES'])",
    "TASK_DEFAULT_EXCHANGE": "Redis lists have no exchanges",
    "TASK_DEFAULT_ROUTING_KEY": "Redis lists have no routing keys",
    "TASK_DEFAULT_PRIORITY": "wurk queues have no priorities: weigh queues with manage.py wurk -q name,weight",
    "TASK_PUBLISH_RETRY": "pass apply_async(retry=True) to retry a push while Redis is unreachable",
    "TASK_PUBLISH_RETRY_POLICY": "pass apply_async(retry_policy={...})",
    "TASK_SEND_SENT_EVENT": "use the after_task_publish signal",
    "WORKER_CONCURRENCY": "use manage.py wurk -c N (WURK['CONCURRENCY'])",
    "WORKER_PREFETCH_MULTIPLIER": "a wurk worker fetches one job per free thread",
    "WORKER_MAX_TASKS_PER_CHILD": "threads are not recycled: see the swarm (docs/swarm.md) for processes",
    "WORKER_MAX_MEMORY_PER_CHILD": "see the swarm's memory limit (docs/swarm.md)",
    "WORKER_SEND_TASK_EVENTS": "the admin shows running jobs without events",
    "WORKER_HIJACK_ROOT_LOGGER": "logging is Django's LOGGING",
    "WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS": "a job whose worker dies is put back on its queue",
    "BEAT_SCHEDULER": "CELERY_BEAT_SCHEDULE is registered as periodic loops; database schedules "
                      "(django_celery_beat) are not read: move them to WURK['PERIODIC']",
    "BEAT_MAX_LOOP_INTERVAL": "the leader checks periodic loops every minute",
    "IMPORTS": "workers import each installed app's tasks.py (WURK['AUTODISCOVER'])",
    "INCLUDE": "workers import each installed app's tasks.py (WURK['AUTODISCOVER'])",
}


#: Celery 3's names of settings wurk reads under their Celery 4+ names.
OLD_NAMES = {"ALWAYS_EAGER": "TASK_ALWAYS_EAGER", "EAGER_PROPAGATES_EXCEPTIONS": "TASK_EAGER_PROPAGATES",
             "ROUTES": "TASK_ROUTES", "DEFAULT_QUEUE": "TASK_DEFAULT_QUEUE", "TASK_RESULT_EXPIRES": "RESULT_EXPIRES",
             "CELERYBEAT_SCHEDULE": "BEAT_SCHEDULE"}
for _old, _new in OLD_NAMES.items():
    NOT_READ[_old] = f"it is Celery 3's name: rename it CELERY_{_new}, which wurk reads"


#: The first word of every setting of Celery 5 under the ``CELERY_`` namespace, and of its
#: Celery 3 names. A ``CELERY_*`` setting starting otherwise belongs to another app sharing
#: the prefix (django-celery-email's ``CELERY_EMAIL_BACKEND``): it is not Celery's, wurk
#: does not speak for it.
CELERY_WORDS = frozenset({
    # Celery 5's namespaces and top-level names
    "ACCEPT", "ARANGODB", "AZUREBLOCKBLOB", "BEAT", "BROKER", "CACHE", "CASSANDRA", "CONTROL", "COSMOSDBSQL",
    "COUCHBASE", "DATABASE", "ELASTICSEARCH", "ENABLE", "EVENT", "GCS", "IMPORTS", "INCLUDE", "MONGODB", "REDIS",
    "RESULT", "S3", "SECURITY", "TASK", "TIMEZONE", "WORKER",
    # Celery 3's names (CELERY_ALWAYS_EAGER, CELERY_DEFAULT_QUEUE, CELERY_ROUTES...)
    "ACKS", "ALLOW", "ALWAYS", "ANNOTATIONS", "CREATE", "DEFAULT", "DISABLE", "EAGER", "IGNORE", "INHERIT", "MAX",
    "MESSAGE", "QUEUE", "QUEUES", "REDIRECT", "REJECT", "REMOTE", "REPR", "RETRY", "ROUTES", "SEND", "STORE",
    "TRACK"})


def is_celery_setting(name: str) -> bool:
    """Whether Django setting ``name`` is one of Celery's (``CELERY_TASK_ROUTES``,
    ``CELERYD_CONCURRENCY``, ``CELERYBEAT_SCHEDULE``), not another app's ``CELERY_EMAIL_*``."""
    if not name.isupper():
        return False
    if name.startswith(("CELERYD_", "CELERYBEAT_")):
        return True
    return name.startswith("CELERY_") and name[len("CELERY_"):].split("_")[0] in CELERY_WORDS


def unread_settings() -> list[tuple[str, str]]:
    """``(setting, what happens to it)`` for each of Celery's ``CELERY_*`` settings wurk
    does not read (another app's setting sharing the prefix is left alone)."""
    from django.conf import settings

    if not settings.configured:
        return []
    out = []
    for name in sorted(dir(settings)):
        if not is_celery_setting(name):
            continue
        short = name[len("CELERY_"):] if name.startswith("CELERY_") else name
        if short in celery_settings.READ:
            continue
        out.append((name, NOT_READ.get(short, "wurk_django does not read it; it has no effect")))
    return out


def check_celery_settings(app_configs: Any = None, **kwargs: Any) -> list[Any]:
    from django.core import checks

    from . import beat

    messages: list[Any] = [
        checks.Warning(f"{name} is not read by wurk_django: {what}", obj="settings", id="wurk.W030",
                       hint="delete it once Celery is gone (docs/from-celery.md lists every setting)")
        for name, what in unread_settings()]
    messages += [checks.Error(problem, obj="settings.CELERY_BEAT_SCHEDULE", id="wurk.E040",
                              hint="docs/from-celery.md: 'Settings'") for problem in beat.problems()]
    return messages
