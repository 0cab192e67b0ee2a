"""End to end: tasks enqueued through WurkBackend, run by a real ``manage.py wurk`` (DJ-013, DJ-020, DJ-021)."""

from __future__ import annotations

import json

import pytest

from wurk_django.tasks.compat import AVAILABLE

if not AVAILABLE:
    pytest.skip("neither django.tasks (Django 6+) nor the django-tasks backport", allow_module_level=True)

from tests.support import wait_for  # noqa: E402
from tests.tasks import sample  # noqa: E402
from wurk_django import payload  # noqa: E402
from wurk_django.tasks.compat import TaskResultStatus  # noqa: E402

pytestmark = pytest.mark.slow

# tests.tasks is not an installed app: the worker may import its tasks only when told to.
TASK_MODULES = {"WURK_TEST_EXTRA": json.dumps({"IMPORT_ON_MISS": ["tests.jobsapp", "tests.tasks"]})}


def _finished(task, result_id):
    result = task.get_result(result_id)
    return result if result.is_finished else None


def test_worker_runs_tasks_and_reports_results(backend, redis_db, worker_factory):
    ok = sample.add.enqueue(20, 22)
    coro = sample.async_add.enqueue(1, 2)
    failed = sample.fail_once_only.enqueue("it broke")
    worker_factory("-c", "2", env=TASK_MODULES)

    done = wait_for(lambda: _finished(sample.add, ok.id), message="the add task")
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == 42
    assert done.attempts == 1 and done.worker_ids[0]
    assert done.started_at is not None and done.finished_at >= done.started_at
    assert wait_for(lambda: _finished(sample.async_add, coro.id)).return_value == 3

    bad = wait_for(lambda: _finished(sample.fail_once_only, failed.id), message="the failing task")
    assert bad.status == TaskResultStatus.FAILED
    [error] = bad.errors
    assert error.exception_class is RuntimeError and "it broke" in error.traceback


def test_failing_task_with_retries_waits_in_the_retry_set(backend, redis_db, worker_factory):
    result = sample.fail.enqueue("again later")
    worker_factory("-c", "1", env=TASK_MODULES)
    [raw] = wait_for(lambda: redis_db.zrange("retry", 0, -1), message="a retry entry")
    job = json.loads(raw)
    assert job["jid"] == result.id and job["wrapped"] == "tests.tasks.sample.fail"
    after = sample.fail.get_result(result.id)
    assert after.status == TaskResultStatus.READY and len(after.errors) == 1


def test_refused_payload_goes_to_dead_without_running(backend, redis_db, worker_factory):
    # DJ-020: a TaskJob payload pointing at a plain function is killed, the function never runs.
    result = sample.mark.enqueue("x")
    raw = redis_db.rpop("queue:default")
    job = payload.loads(raw)
    job["wrapped"] = "tests.tasks.sample.plain_function"
    redis_db.lpush("queue:default", payload.dumps(job))
    worker_factory("-c", "1", env=TASK_MODULES)
    [dead] = wait_for(lambda: redis_db.zrange("dead", 0, -1), message="a dead job")
    assert json.loads(dead)["jid"] == result.id
    assert redis_db.llen("test:tasks") == 0
    # The result record is written by the death handlers, just after the dead set's entry.
    wait_for(lambda: sample.mark.get_result(result.id).status == TaskResultStatus.FAILED,
             message="the result recorded failed")
