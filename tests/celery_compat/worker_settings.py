"""Settings of the worker processes the Celery-layer tests start: the test settings, plus
what a Celery project has (``CELERY_*``), chosen by the test through the environment.

* ``WURK_TEST_CELERY_BEAT=1``: a ``CELERY_BEAT_SCHEDULE`` with a crontab, a schedule and a
  timedelta entry (tests.celery_compat.test_settings);
* every worker loads tests.celery_compat.signal_receivers, which records Celery's signals
  in Redis (tests.celery_compat.test_namespace).
"""

import datetime as dt
import os

import tests.celery_compat.signal_receivers  # noqa: F401, E402 - connects at boot, before worker_ready
from tests.settings import *  # noqa: F403
from wurk_django.celery.schedules import crontab, schedule  # noqa: E402

if os.environ.get("WURK_TEST_CELERY_BEAT"):
    CELERY_BEAT_SCHEDULE = {
        "cron-every-minute": {"task": "tests.celery_compat.tasks.beat_record", "schedule": crontab(),
                              "args": ("crontab",)},
        "interval": {"task": "tests.celery_compat.tasks.beat_record", "schedule": schedule(run_every=60),
                     "kwargs": {"label": "schedule"}},
        "timedelta": {"task": "tests.celery_compat.tasks.beat_record", "schedule": dt.timedelta(minutes=1),
                      "args": ("timedelta",), "options": {"queue": "celery_kw"}},
    }
