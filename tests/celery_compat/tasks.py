"""Tasks of the Celery-layer tests (module level, so a worker resolves them by name)."""

from __future__ import annotations

import time

from tests.support import wait_for  # noqa: F401 - re-exported for the tests
from wurk_django.celery import shared_task
from wurk_django.redis.app import redis_client


class Flaky(Exception):
    pass


class Refused(Exception):
    def __init__(self, code: int, why: str) -> None:
        super().__init__(code, why)
        self.code = code


@shared_task
def add(x, y):
    return x + y


@shared_task(queue="celery_kw")
def greet(name, *, greeting="hello", punctuation="!"):
    redis_client().rpush("test:celery", f"{greeting} {name}{punctuation}")
    return f"{greeting} {name}{punctuation}"


@shared_task(name="proj.tasks.fail", max_retries=0)
def fail(code, why):
    raise Refused(code, why)


@shared_task(bind=True, max_retries=2, default_retry_delay=0)
def bound_retry(self, key):
    redis_client().rpush(key, f"{self.request.id}:{self.request.retries}")
    if self.request.retries < 2:
        raise self.retry(exc=Flaky("not yet"), countdown=0)
    return self.request.retries


@shared_task(autoretry_for=(Flaky,), max_retries=1, retry_backoff=True)
def auto(key, times):
    n = redis_client().incr(key)
    if n <= times:
        raise Flaky(f"attempt {n}")
    return n


@shared_task(ignore_result=True)
def quiet(key):
    redis_client().rpush(key, "ran")


@shared_task(bind=True, max_retries=1)
def more_retries(self, key):
    """Asks for more retries than its max_retries, per call."""
    redis_client().rpush(key, str(self.request.retries))
    if self.request.retries < 2:
        raise self.retry(countdown=5, max_retries=3)
    return "done"


@shared_task(bind=True, max_retries=1)
def gives_up(self):
    raise self.retry(exc=Flaky("still down"), countdown=0)


@shared_task(bind=True)
def introspect(self, a, *, b=None):
    r = self.request
    return {"id": r.id, "task": r.task, "args": r.args, "kwargs": r.kwargs, "retries": r.retries,
            "queue": r.queue, "eager": r.is_eager, "name": self.name}


@shared_task(bind=True)
def progress(self, key):
    import time

    self.update_state(state="PROGRESS", meta={"done": 1})
    redis_client().rpush(key, "reported")
    while not self.request.is_eager and not redis_client().exists(key + ":go"):
        time.sleep(0.02)
    return "ok"


@shared_task(bind=True)
def slow(self, key):
    import time

    redis_client().rpush(key, "started")
    while not redis_client().exists(key + ":go"):
        time.sleep(0.02)
    return "slow done"


@shared_task(bind=True, max_retries=3)
def retried_twice(self, key):
    """Two ``self.retry(countdown=1)``, then done: Celery takes about 2 s for it."""
    redis_client().rpush(key, f"{time.time():.3f}")
    if self.request.retries < 2:
        raise self.retry(countdown=1)
    return self.request.retries


@shared_task
def beat_record(name=None, *, label=None):
    """Fired by CELERY_BEAT_SCHEDULE entries (tests.celery_compat.worker_settings)."""
    redis_client().rpush("test:beat", name or label)


@shared_task(bind=True)
def read_headers(self):
    return self.request.headers


@shared_task(bind=True, max_retries=1)
def retry_once(self):
    if self.request.retries < 1:
        raise self.retry(exc=Flaky("once more"), countdown=0)
    return "second"
