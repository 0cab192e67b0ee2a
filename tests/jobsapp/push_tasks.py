"""A Celery-style task and a ``django.tasks`` task that a web process pushes
(tests/test_features.py): as light as a user's task module."""

from __future__ import annotations

from wurk_django.celery import shared_task
from wurk_django.tasks.compat import task


@shared_task
def celery_add(x, y):
    return x + y


@task()
def tasks_add(a, b):
    return a + b
