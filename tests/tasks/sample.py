"""Tasks used by the tasks-backend tests (imported only where django.tasks or the backport exists)."""

from __future__ import annotations

import datetime as dt

from wurk_django.redis.connection import get_redis
from wurk_django.tasks import task as wurk_task
from wurk_django.tasks.compat import TaskContext, task


@task
def add(a, b):
    return a + b


@task()
def echo(*args, **kwargs):
    return {"args": list(args), "kwargs": kwargs}


@task()
async def async_add(a, b):
    return a + b


@task()
def fail(message="task failed"):
    raise ValueError(message)


@task()
def exits():
    raise SystemExit("leaving")


@task()
def not_json():
    return dt.datetime(2024, 1, 1)


@task(takes_context=True)
def context_info(context: TaskContext):
    return {"id": context.task_result.id, "attempt": context.attempt}


@task()
def mark(value):
    get_redis().rpush("test:tasks", str(value))
    return value


@wurk_task(retry=False)
def fail_once_only(message="no retries"):
    raise RuntimeError(message)


@wurk_task(retry=2)
def fail_twice_retry():
    raise RuntimeError("retry me")


def plain_function():
    """Not a task: the runner must refuse to call it."""
    get_redis().rpush("test:tasks", "plain function ran")


@task()
def flaky():
    """Fails on its first call, succeeds afterwards (counts in Redis, so it works across processes)."""
    if get_redis().incr("test:flaky") == 1:
        raise ConnectionError("first call fails")
    return "second time lucky"


@task()
def outlives_a_stop(seconds, where="c"):
    """Sleeps ``seconds`` on its first call (longer than a worker's stop timeout), returns at
    once afterwards (counts in Redis, so it works across processes). ``where="c"`` sleeps in
    one C call, which the stop's interruption cannot reach; ``"python"`` in short sleeps,
    between which it can."""
    import time

    if get_redis().incr("test:outlives") == 1:
        if where == "c":
            time.sleep(seconds)
        else:
            deadline = time.monotonic() + seconds
            while time.monotonic() < deadline:
                time.sleep(0.02)
    return "ran"


@wurk_task()
def mark_by(value):
    """A WurkTask whatever this process's TASKS (deadline tests: ``.using(deadline=...)``)."""
    get_redis().rpush("test:tasks", str(value))
    return value
