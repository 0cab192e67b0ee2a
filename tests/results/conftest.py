"""Fixtures of the results tests: a real worker process allowed to import tests.results.
The status tests (tests/status/conftest.py) take the same fixtures from here."""

from __future__ import annotations

import json

import pytest


def importing(package: str) -> dict[str, str]:
    """The environment of a worker process allowed to import job modules under ``package``."""
    return {"WURK_TEST_EXTRA": json.dumps({"IMPORT_ON_MISS": [package]})}


MODULES = importing("tests.results")


def worker_fixture(env: dict[str, str]):
    """A ``worker`` fixture: ``worker(*args)`` starts one ``manage.py wurk`` process on the
    default queue with ``env``."""

    @pytest.fixture
    def worker(worker_factory):
        def start(*args: str):
            return worker_factory("-c", "2", "-q", "default", *args, env=env)

        return start

    return worker


worker = worker_fixture(MODULES)


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
    (the retry layer adds up to 10 x (retries + 1) seconds of jitter no test should wait for);
    returns the job moved, or ``None``."""

    def move(jid: str) -> dict | None:
        for raw in redis_db.zrange("retry", 0, -1):
            job = json.loads(raw)
            if job["jid"] == jid and redis_db.zrem("retry", raw):
                redis_db.lpush(f"queue:{job['queue']}", raw)
                return job
        return None

    return move
