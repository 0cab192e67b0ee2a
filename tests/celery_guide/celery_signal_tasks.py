"""The signals guide's handlers: connected where the worker imports the task's module."""

from __future__ import annotations

from celery import shared_task
from celery.signals import task_postrun, task_prerun

from tests.celery_guide import celery_app  # noqa: F401 - celery only
from tests.celery_guide.celery_tasks import store


@task_prerun.connect
def before(sender=None, task_id=None, task=None, args=None, **kwargs):
    if task.name.endswith("signalled"):
        store().rpush(f"guide:signals:{task_id}", "prerun")


@task_postrun.connect
def after(sender=None, task_id=None, task=None, retval=None, state=None, **kwargs):
    if task.name.endswith("signalled"):
        store().rpush(f"guide:signals:{task_id}", f"postrun:{retval}:{state}")


@shared_task
def signalled(x):
    return x * 2
