"""Fixtures for the django.tasks backend tests; the modules skip themselves without a Tasks framework
(Django 6's django.tasks or the django-tasks backport, picked by wurk_django.tasks.compat)."""

from __future__ import annotations

import pytest

WURK_TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"}}


@pytest.fixture
def backend(settings):
    """``TASKS`` pointing at WurkBackend for this test; returns the default backend."""
    from wurk_django.tasks.compat import task_backends

    settings.TASKS = WURK_TASKS
    return task_backends["default"]


@pytest.fixture
def queued(redis_db):
    """Pop the next pushed payload from a queue, as a worker would, as a dict."""
    from wurk_django import payload

    def pop(queue: str = "default") -> dict:
        raw = redis_db.rpop(f"queue:{queue}")
        assert raw is not None, f"nothing was pushed to queue:{queue}"
        return payload.loads(raw)

    return pop
