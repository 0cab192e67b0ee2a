"""Deadlines from the other front doors (issue 47 item 5): a Celery-style ``apply_async(deadline=...)``
and a ``django.tasks`` task's ``using(deadline=...)``, past or near when a real worker fetches them,
never run; they are dead with ``DeadlineExceeded`` (or discarded) and their results read FAILURE
and FAILED."""

from __future__ import annotations

import json
import time

import pytest

from tests.celery_compat.tasks import greet
from tests.support import wait_for
from wurk_django.celery import states
from wurk_django.redis.app import redis_client
from wurk_django.tasks.compat import AVAILABLE

pytestmark = pytest.mark.slow

MODULES = {"WURK_TEST_EXTRA": json.dumps({"IMPORT_ON_MISS": ["tests.jobsapp", "tests.tasks", "tests.celery_compat"]})}


def _dead(redis_db) -> dict[str, dict]:
    return {job["jid"]: job for job in (json.loads(raw) for raw in redis_db.zrange("dead", 0, -1))}


@pytest.mark.skipif(not AVAILABLE, reason="neither django.tasks (Django 6+) nor the django-tasks backport")
def test_celery_and_django_tasks_past_their_deadline_never_run(settings, redis_db, worker_factory):
    from tests.tasks import sample
    from wurk_django.tasks.compat import TaskResultStatus

    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"}}
    past = time.time() - 5
    celery_dead = greet.apply_async(("late",), queue="default", deadline=past)
    celery_gone = greet.apply_async(("gone",), queue="default", deadline=past, deadline_action="discard")
    # Beside Celery's expires (docs/from-celery.md): past both, the deadline rules (dead, FAILURE);
    # past the expiry only, it is skipped (REVOKED).
    both = greet.apply_async(("both",), queue="default", deadline=past, expires=0.001)
    expired = greet.apply_async(("expired",), queue="default", deadline=time.time() + 3600, expires=0.001)
    near = time.time() + 2  # in the future at the push, passed when the worker fetches it
    task_dead = sample.mark_by.using(deadline=near).enqueue("task-late")
    task_gone = sample.mark_by.using(deadline=near, deadline_action="discard").enqueue("task-gone")
    on_time = sample.mark_by.using(deadline=time.time() + 3600).enqueue("on-time")
    wait_for(lambda: time.time() > near + 0.5, timeout=10, message="the near deadline passed")

    worker = worker_factory("-c", "2", env=MODULES)
    wait_for(lambda: sample.mark_by.get_result(on_time.id).is_finished, timeout=90, message="the on-time task")
    wait_for(lambda: {celery_dead.id, task_dead.id, both.id} <= set(_dead(redis_db)), timeout=90,
             message="the late calls and task dead")
    wait_for(lambda: expired.state == states.REVOKED, timeout=60, message="the expired call skipped")
    wait_for(lambda: worker.output().count("discarded") >= 2, timeout=30, message="the two discards logged")

    dead = _dead(redis_db)
    for jid in (celery_dead.id, task_dead.id):
        assert dead[jid]["error_class"] == "wurk_django.errors.DeadlineExceeded"
        assert "not started by its deadline" in dead[jid]["error_message"]
    assert celery_gone.id not in dead and task_gone.id not in dead
    assert celery_dead.state == states.FAILURE and both.state == states.FAILURE
    assert dead[both.id]["error_class"] == "wurk_django.errors.DeadlineExceeded" and expired.id not in dead
    assert celery_gone.state == states.FAILURE  # discarded: no dead entry, the result still says why
    assert "not started by its deadline" in str(celery_dead.result)
    assert sample.mark_by.get_result(task_gone.id).status == TaskResultStatus.FAILED
    assert sample.mark_by.get_result(task_dead.id).status == TaskResultStatus.FAILED
    assert sample.mark_by.get_result(on_time.id).status == TaskResultStatus.SUCCESSFUL
    assert redis_client().lrange("test:celery", 0, -1) == []  # no greeting ran
    assert redis_db.lrange("test:tasks", 0, -1) == [b"on-time"]  # only the task in time ran
