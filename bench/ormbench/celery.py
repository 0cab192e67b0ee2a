"""Celery's Django setup, as its documentation gives it (``celery -A ormbench worker``)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "ormbench.settings")

app = Celery("ormbench")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
