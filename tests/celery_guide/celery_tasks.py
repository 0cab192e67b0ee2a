"""The user guide's tasks, written for Celery. wurk_tasks.py runs this very source with its
import lines changed to ``wurk_django.celery``: the move docs/from-celery.md promises.

Lines ending in ``# celery only`` are what a project deletes when it moves (its Celery app).
"""

from __future__ import annotations

import os

import redis
from celery import shared_task
from celery.exceptions import MaxRetriesExceededError

from tests.celery_guide import celery_app  # noqa: F401 - celery only


def store() -> redis.Redis:
    """The test Redis, where tasks leave marks the examples read back."""
    return redis.Redis.from_url(os.environ.get("WURK_TEST_REDIS_URL", "redis://127.0.0.1:6379/15"))


class Flaky(Exception):
    pass


@shared_task
def add(x, y):
    return x + y


@shared_task
def mul(x, y):
    return x * y


@shared_task
def xsum(numbers):
    return sum(numbers)


@shared_task
def div(x, y):
    return x / y


@shared_task
def hello(to, greeting="hello"):
    return f"{greeting} {to}"


@shared_task(name=__name__ + ".sum-of-two-numbers")
def named_add(x, y):
    return x + y


@shared_task(bind=True)
def whoami(self, *args, **kwargs):
    return {"id": self.request.id, "args": list(self.request.args), "kwargs": dict(self.request.kwargs),
            "retries": self.request.retries, "name": self.name}


@shared_task(bind=True, max_retries=3, default_retry_delay=0)
def retry_twice(self, key):
    n = store().incr(key)
    if n < 3:
        raise self.retry(exc=Flaky(f"attempt {n}"), countdown=0)
    return self.request.retries


@shared_task(bind=True, max_retries=1, default_retry_delay=0)
def always_retry(self):
    raise self.retry(exc=Flaky("still down"), countdown=0)


@shared_task(bind=True, max_retries=1, default_retry_delay=0)
def retry_without_exc(self):
    try:
        raise self.retry(countdown=0)
    except MaxRetriesExceededError:
        return "gave up"


@shared_task(autoretry_for=(Flaky,), max_retries=2, retry_backoff=False, default_retry_delay=0)
def auto_retry(key):
    n = store().incr(key)
    if n < 3:
        raise Flaky(f"attempt {n}")
    return n


@shared_task(autoretry_for=(Flaky,), retry_kwargs={"max_retries": 1, "countdown": 0})
def auto_gives_up():
    raise Flaky("never")


@shared_task(ignore_result=True)
def quiet(key):
    store().set(key, "ran")


@shared_task
def mark(key, value="ran"):
    store().rpush(key, value)
    return value


@shared_task
def record(result, key):
    """A link callback: the parent's result comes first."""
    store().rpush(key, result)
    return result


@shared_task
def log_error(request, exc, traceback):
    store().rpush("guide:errors", f"{request.id}:{type(exc).__name__}")


@shared_task(bind=True)
def progress(self):
    self.update_state(state="PROGRESS", meta={"current": 50, "total": 100})
    return "done"


@shared_task(queue="guide_high")
def routed(x):
    return x + 1
