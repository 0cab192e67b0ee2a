"""Fixtures of the status tests: a real worker process allowed to import tests.status."""

from __future__ import annotations

import json

import pytest

from tests.admin.conftest import admin_client  # noqa: F401 - the admin's signed-in client fixture

MODULES = {"WURK_TEST_EXTRA": json.dumps({"IMPORT_ON_MISS": ["tests.status"]})}


@pytest.fixture
def worker(worker_factory):
    """Start one ``manage.py wurk`` process on the default queue."""

    def start(*args: str):
        return worker_factory("-c", "2", "-q", "default", *args, env=MODULES)

    return start


@pytest.fixture
def due(redis_db):
    """Move the retry-set entry of ``jid`` onto its queue now (the retry layer's jitter is
    seconds no test should wait for)."""

    def move(jid: str) -> bool:
        for raw in redis_db.zrange("retry", 0, -1):
            job = json.loads(raw)
            if job["jid"] == jid and redis_db.zrem("retry", raw):
                redis_db.lpush(f"queue:{job['queue']}", raw)
                return True
        return False

    return move


@pytest.fixture
def tasks_backend(settings):
    from wurk_django.tasks.compat import AVAILABLE

    if not AVAILABLE:
        pytest.skip("neither django.tasks (Django 6+) nor the django-tasks backport")
    from wurk_django.tasks.compat import task_backends

    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"}}
    return task_backends["default"]
