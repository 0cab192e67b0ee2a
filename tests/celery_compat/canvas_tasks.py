"""Tasks of the canvas tests: the Celery user guide's ``add``/``mul``/``xsum``, and errbacks."""

from __future__ import annotations

from wurk_django.celery import shared_task
from wurk_django.redis.app import redis_client


@shared_task
def add(x, y):
    return x + y


@shared_task
def mul(x, y):
    return x * y


@shared_task
def xsum(numbers):
    return sum(numbers)


@shared_task(max_retries=0)
def boom(x):
    raise ValueError(f"boom {x}")


@shared_task
def on_error(request, exc, traceback):
    """Celery 5's errback form: called where the failure is seen."""
    redis_client().rpush("test:errback", f"{request.id}|{type(exc).__name__}: {exc}|{'Traceback' in traceback}")


@shared_task
def on_error_old(task_id):
    """Celery's old errback form: pushed as a task with the failed call's id."""
    redis_client().rpush("test:errback-old", task_id)


@shared_task
def note(value, key):
    redis_client().rpush(key, repr(value))
    return value
