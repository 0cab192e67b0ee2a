"""The test settings with every feature switched on: batches (always on), unique jobs,
encryption, statsd, historical metrics, leader election and periodic jobs; for the test
that a process which pushes imports no worker engine (tests/test_features.py).

Without ``django.contrib.admin``: with it, ``django.setup()`` imports every app's admin
module (``wurk_django.admin`` too) by Django's own autodiscovery, before anything is pushed.
"""

from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS, WURK

INSTALLED_APPS = [app for app in INSTALLED_APPS if app != "django.contrib.admin"]

WURK = {
    **WURK,
    "UNIQUE_JOBS": True,
    "ENCRYPTION": {"ACTIVE_VERSION": 1, "KEYS": {1: "a2tra2tra2tra2tra2tra2tra2tra2tra2tra2tra2s="}},
    # Nothing listens there: statsd sends over non-blocking UDP and drops what is not taken.
    "STATSD": {"HOST": "127.0.0.1", "PORT": 8125, "TAGS": ["env:test"]},
    "HISTORY": {"ROLLUP_INTERVAL": 60, "SNAPSHOT_INTERVAL": 60},
    "LEADER": {"TTL": 30, "RENEW_INTERVAL": 15},
    "PERIODIC": [{"cron": "0 4 * * *", "job": "tests.jobsapp.push_jobs.Plain", "args": ["cron"]}],
}
