"""Django settings for the wurk_django side of the benchmark (Redis DB 9 only).

``BENCH_JOBLOG=0`` sets the ``wurk_django.job`` logger to WARNING (no per-job
lines); by default the job log stays on, as in production. ``BENCH_COUNT=1``
loads the client-side command counter (measurement runs only). ``BENCH_FEATURES=1``
switches on unique jobs, encryption, statsd (to a port nothing listens on), history,
leader election and a periodic job (bench/startup.py); ``BENCH_ADMIN=1`` adds the
admin's apps, as a web process has them.
"""

import os

SECRET_KEY = "bench-only"
DEBUG = False
USE_TZ = True
INSTALLED_APPS = ["wurk_django", "wurkbench"]
# BENCH_DATABASE=1 (bench/micro.py) configures SQLite, as a real project has a database
# even when its jobs do not touch it; the drains run without one, as before.
DATABASES = ({"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": "/tmp/wurk-bench.sqlite3"}}
             if os.environ.get("BENCH_DATABASE") == "1" else {})
# The redis-cache shape: django-redis's client, built as docs/jobs.md says (the fast client).
CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9"),
        "OPTIONS": {"REDIS_CLIENT_CLASS": "wurk_django.FastRedis", "CONNECTION_POOL_KWARGS": {"protocol": 2}},
    }
}
WURK = {
    "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9"),
    "QUEUES": ["bench"],
    "CONCURRENCY": 10,
}

if os.environ.get("BENCH_FETCH_SIZE"):  # FETCH_SIZE: how many jobs one fetch moves (1: as Sidekiq)
    WURK["FETCH_SIZE"] = int(os.environ["BENCH_FETCH_SIZE"])

if os.environ.get("BENCH_FEATURES") == "1":
    WURK.update({
        "UNIQUE_JOBS": True,
        "ENCRYPTION": {"ACTIVE_VERSION": 1, "KEYS": {1: "YmVuY2gtb25seS1ub3QtYS1yZWFsLWtleS0zMmJ5dGU="}},
        "STATSD": {"HOST": "127.0.0.1", "PORT": 8125},
        "HISTORY": {"ROLLUP_INTERVAL": 60, "SNAPSHOT_INTERVAL": 60},
        "LEADER": {"TTL": 30, "RENEW_INTERVAL": 15},
        "PERIODIC": [{"cron": "0 4 * * *", "job": "wurkbench.jobs.Noop"}],
    })

if os.environ.get("BENCH_ADMIN") == "1":
    INSTALLED_APPS = ["django.contrib.admin", "django.contrib.auth", "django.contrib.contenttypes",
                      "django.contrib.sessions", "django.contrib.messages", *INSTALLED_APPS]

if os.environ.get("BENCH_JOBLOG", "1") == "0":
    LOGGING = {
        "version": 1,
        "disable_existing_loggers": False,
        "loggers": {"wurk_django.job": {"level": "WARNING"}},
    }

if os.environ.get("BENCH_COUNT") == "1":
    from peers import cmdcount

    cmdcount.install()

# BENCH_STATSD=host:port turns statsd on (docs/benchmarks.md: statsd on versus off).
if os.environ.get("BENCH_STATSD"):
    _host, _, _port = os.environ["BENCH_STATSD"].rpartition(":")
    WURK["STATSD"] = {"HOST": _host, "PORT": int(_port)}

# bench/pickup.py: settings of one measurement (e.g. {"FETCH_NOTIFICATIONS": false}), as JSON.
if os.environ.get("BENCH_WURK"):
    import json

    WURK.update(json.loads(os.environ["BENCH_WURK"]))
