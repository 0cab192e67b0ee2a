"""The user guide's time-limit tasks (their exception is imported from celery.exceptions)."""

from __future__ import annotations

import time

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded

from tests.celery_guide import celery_app  # noqa: F401 - celery only


@shared_task(soft_time_limit=1)
def soft_limited():
    try:
        time.sleep(5)
    except SoftTimeLimitExceeded:
        return "cleaned up"
    return "slept"


@shared_task(time_limit=1)
def hard_limited():
    time.sleep(5)
    return "slept"
