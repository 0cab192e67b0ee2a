"""Fixtures of the results tests: a real worker process allowed to import tests.results."""

from __future__ import annotations

import json

import pytest

MODULES = {"WURK_TEST_EXTRA": json.dumps({"IMPORT_ON_MISS": ["tests.results"]})}


@pytest.fixture
def worker(worker_factory):
    """Start one ``manage.py wurk`` process on the default queue."""

    def start(*args: str):
        return worker_factory("-c", "2", "-q", "default", *args, env=MODULES)

    return start


@pytest.fixture
def tasks_backend(settings):
    from wurk_django.tasks.compat import AVAILABLE

    if not AVAILABLE:
        pytest.skip("neither django.tasks (Django 6+) nor the django-tasks backport")
    from wurk_django.tasks.compat import task_backends

    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"}}
    return task_backends["default"]


@pytest.fixture
def due(redis_db):
    """Move the retry-set entry of ``jid`` onto its queue now, as the poller does when it is due
    (the retry layer adds up to 10 x (retries + 1) seconds of jitter no test should wait for)."""

    def move(jid: str) -> dict | None:
        for raw in redis_db.zrange("retry", 0, -1):
            job = json.loads(raw)
            if job["jid"] == jid and redis_db.zrem("retry", raw):
                redis_db.lpush(f"queue:{job['queue']}", raw)
                return job
        return None

    return move
