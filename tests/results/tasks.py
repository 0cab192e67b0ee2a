"""Tasks of the results tests, Celery-style and django.tasks, at module level so a worker
process resolves them by name (tests.results is no installed app: the worker is told it
may import it)."""

from __future__ import annotations

import time

from wurk_django.celery import shared_task
from wurk_django.redis.app import redis_client
from wurk_django.tasks.compat import AVAILABLE


@shared_task
def add(x, y):
    return x + y


@shared_task(bind=True, max_retries=2, default_retry_delay=0)
def celery_twice_then_ok(self, key):
    n = redis_client().incr(key)
    if n <= 2:
        raise self.retry(exc=ValueError(f"attempt {n}"), countdown=0)
    return n


@shared_task(autoretry_for=(ValueError,), max_retries=1, default_retry_delay=0)
def celery_never_ok(key):
    redis_client().incr(key)
    raise ValueError("still broken")


def _ignore_stops(key: str) -> str:
    """Run past a hard time limit in a loop the watchdog's exception cannot stop."""
    redis_client().rpush(key, "started")
    deadline = time.monotonic() + 4
    while time.monotonic() < deadline:
        try:
            time.sleep(0.05)
        except BaseException:  # noqa: BLE001, S112 - the task ignores being told to stop, on purpose
            continue
    redis_client().rpush(key, "came back")
    return "too late"


@shared_task(max_retries=0, time_limit=1)
def celery_stuck(key):
    return _ignore_stops(key)


# The retry waits ten minutes: the test looks at the record while it waits, after the
# abandoned thread came back (a retry run in between would be a new attempt to look at).
@shared_task(autoretry_for=(Exception,), max_retries=1, default_retry_delay=600, time_limit=1)
def celery_stuck_retried(key):
    return _ignore_stops(key)


def _busy(key: str, seconds: float) -> str:
    """Note the start, then run ``seconds`` in short sleeps (a stop is raised between them)."""
    redis_client().rpush(key, "started")
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)
    return "done"


@shared_task(soft_time_limit=1)
def celery_soft_unhandled(key):
    return _busy(key, 30)  # the soft limit's exception is not caught: the task fails with it


@shared_task
def celery_busy(key, seconds):
    return _busy(key, seconds)


if AVAILABLE:
    from wurk_django.tasks import task as wurk_task

    @wurk_task(retry=2)
    def tasks_twice_then_ok(key):
        n = redis_client().incr(key)
        if n <= 2:
            raise ValueError(f"attempt {n}")
        return n

    @wurk_task(retry=1)
    def tasks_never_ok(key):
        redis_client().incr(key)
        raise ValueError("still broken")

    @wurk_task()
    def tasks_add(a, b):
        return a + b
