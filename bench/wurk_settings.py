"""Django settings for the wurk_django side of the benchmark (Redis DB 9 only).

``BENCH_JOBLOG=0`` sets the ``wurk_django.job`` logger to WARNING (no per-job
lines); by default the job log stays on, as in production. ``BENCH_COUNT=1``
loads the client-side command counter (measurement runs only).
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
WURK = {
    "REDIS_URL": os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/9"),
    "QUEUES": ["bench"],
    "CONCURRENCY": 10,
}

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
