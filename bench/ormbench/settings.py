"""One settings module for every system of the ORM shape; ``BENCH_ORM_SYSTEM`` picks the integration.

The database settings are the same for all five: PostgreSQL on 127.0.0.1:5432
(``BENCH_PG_DB``, default ``wurk_ormbench``), ``CONN_MAX_AGE`` from
``BENCH_CONN_MAX_AGE`` (60 by default: a worker keeps its connections between
jobs, as a team would configure it), no health checks, autocommit. Each
system's Django integration closes connections that are older than that
around each job (wurk_django, Celery's Django fix-up, django_dramatiq's
DbConnectionsMiddleware, djhuey's ``db_task``), except Celery's, which closes
them before and after every task unless ``CELERY_DB_REUSE_MAX`` is set
(``BENCH_CELERY_DB_REUSE_MAX``; bench/orm.py's ``celery-reuse``). RQ forks a
child per job, which opens its own. Redis is ``BENCH_REDIS_URL`` (DB 13 by default).
``BENCH_JOBLOG=0`` turns wurk_django's per-job log lines off.
"""

import os

SYSTEM = os.environ.get("BENCH_ORM_SYSTEM", "wurk")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/13")

SECRET_KEY = "bench-only"
DEBUG = False
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": os.environ.get("BENCH_PG_DB", "wurk_ormbench"),
        "USER": os.environ.get("BENCH_PG_USER", "postgres"),
        "HOST": "127.0.0.1",
        "PORT": 5432,
        "CONN_MAX_AGE": int(os.environ.get("BENCH_CONN_MAX_AGE", "60")),
        "CONN_HEALTH_CHECKS": False,
    }
}
INSTALLED_APPS = ["ormbench"]

if SYSTEM == "wurk":
    INSTALLED_APPS.append("wurk_django")
    WURK = {"REDIS_URL": REDIS_URL, "QUEUES": ["bench"], "CONCURRENCY": 10}
    if os.environ.get("BENCH_JOBLOG", "1") == "0":
        LOGGING = {"version": 1, "disable_existing_loggers": False,
                   "loggers": {"wurk_django.job": {"level": "WARNING"}}}
elif SYSTEM == "celery":
    # Celery's documented Django setup: ormbench/celery.py reads the CELERY_* settings.
    CELERY_BROKER_URL = REDIS_URL
    CELERY_TASK_IGNORE_RESULT = True
    CELERY_TASK_DEFAULT_QUEUE = "bench"
    CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
    if os.environ.get("BENCH_CELERY_DB_REUSE_MAX"):
        CELERY_DB_REUSE_MAX = int(os.environ["BENCH_CELERY_DB_REUSE_MAX"])
elif SYSTEM == "dramatiq":
    INSTALLED_APPS.insert(0, "django_dramatiq")
    # django_dramatiq's default list without Prometheus (an HTTP exporter) and AdminMiddleware
    # (a row written per message, optional): the job's own queries are what is measured.
    DRAMATIQ_BROKER = {
        "BROKER": "dramatiq.brokers.redis.RedisBroker",
        "OPTIONS": {"url": REDIS_URL},
        "MIDDLEWARE": [
            "dramatiq.middleware.AgeLimit",
            "dramatiq.middleware.TimeLimit",
            "dramatiq.middleware.Callbacks",
            "dramatiq.middleware.Retries",
            "django_dramatiq.middleware.DbConnectionsMiddleware",
        ],
    }
    DRAMATIQ_AUTODISCOVER_MODULES = ["tasks"]
elif SYSTEM == "huey":
    INSTALLED_APPS.append("huey.contrib.djhuey")
    HUEY = {"huey_class": "huey.RedisHuey", "name": "ormbench", "url": REDIS_URL, "results": False,
            "immediate": False, "consumer": {"workers": 10, "worker_type": "thread"}}
elif SYSTEM == "rq":
    INSTALLED_APPS.append("django_rq")
    RQ_QUEUES = {"bench": {"URL": REDIS_URL}}
elif SYSTEM == "migrate":  # bench/orm.py --setup: every integration's tables, once
    import importlib.util

    # The integrations installed here (a run of wurk_django's systems alone needs none).
    INSTALLED_APPS += [app for app in ("django_dramatiq", "django_rq") if importlib.util.find_spec(app)]
    DRAMATIQ_BROKER = {"BROKER": "dramatiq.brokers.stub.StubBroker", "MIDDLEWARE": []}
