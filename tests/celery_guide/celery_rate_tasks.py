"""The user guide's rate-limited task."""

from __future__ import annotations

from celery import shared_task

from tests.celery_guide import celery_app  # noqa: F401 - celery only


@shared_task(rate_limit="100/m")
def limited(x):
    return x
