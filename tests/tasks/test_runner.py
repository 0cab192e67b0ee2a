"""TaskJob, worker side, run in-process on the payload read back from Redis (DJ-020, DJ-021)."""

from __future__ import annotations

import threading

import pytest

from wurk_django.tasks.compat import AVAILABLE

if not AVAILABLE:
    pytest.skip("neither django.tasks (Django 6+) nor the django-tasks backport", allow_module_level=True)

from tests.tasks import sample  # noqa: E402
from wurk_django import payload, registry, testing  # noqa: E402
from wurk_django.conf import get_config  # noqa: E402
from wurk_django.tasks import TaskJob, WurkBackend  # noqa: E402
from wurk_django.tasks.compat import TaskResultStatus, task_finished, task_started  # noqa: E402
from wurk_django.tasks.job import TaskFailed, set_worker_id, worker_id  # noqa: E402
from wurk_django.tasks.results import RefusedTask  # noqa: E402


@pytest.fixture
def run(backend, queued):
    """Run the next queued task job the way the worker does (registry lookup, middleware, run)."""

    def go(**payload_changes):
        job = {**queued(), **payload_changes}
        assert registry.resolve(job["class"]) is TaskJob
        return testing.execute(job)

    return go


@pytest.fixture
def task_signals():
    seen = []

    def started(sender, task_result, **kwargs):
        seen.append(("started", sender, task_result.status, task_result.attempts))

    def finished(sender, task_result, **kwargs):
        seen.append(("finished", sender, task_result.status, task_result.attempts))

    task_started.connect(started)
    task_finished.connect(finished)
    yield seen
    task_started.disconnect(started)
    task_finished.disconnect(finished)


def test_success_records_value_timestamps_and_worker(run, task_signals):
    result = sample.add.enqueue(2, 3)
    run()
    done = sample.add.get_result(result.id)
    assert done.status == TaskResultStatus.SUCCESSFUL and done.is_finished
    assert done.return_value == 5
    assert done.enqueued_at <= done.started_at <= done.last_attempted_at <= done.finished_at
    assert done.worker_ids == [worker_id()] and done.attempts == 1
    assert done.errors == []
    assert task_signals == [
        ("started", WurkBackend, TaskResultStatus.RUNNING, 1),
        ("finished", WurkBackend, TaskResultStatus.SUCCESSFUL, 1),
    ]


def test_refresh_sees_the_worker_outcome(run):
    result = sample.echo.enqueue(1, k="v")
    run()
    result.refresh()
    assert result.status == TaskResultStatus.SUCCESSFUL
    assert result.return_value == {"args": [1], "kwargs": {"k": "v"}}


def test_async_task_runs_on_the_worker(run):
    result = sample.async_add.enqueue(40, 2)
    run()
    assert sample.async_add.get_result(result.id).return_value == 42


def test_takes_context_gets_result_id_and_attempt(run):
    result = sample.context_info.enqueue()
    run()
    assert sample.context_info.get_result(result.id).return_value == {"id": result.id, "attempt": 1}


def test_failure_that_will_retry_is_ready_with_an_error(run, task_signals):
    # DJ-021: a retry follows, so READY with the error appended; the exception reaches the retry layer.
    result = sample.fail.enqueue("bad input")
    with pytest.raises(ValueError, match="bad input"):
        run()
    after = sample.fail.get_result(result.id)
    assert after.status == TaskResultStatus.READY
    assert after.finished_at is None
    [error] = after.errors
    assert error.exception_class is ValueError
    assert error.traceback.endswith("ValueError: bad input\n")
    assert task_signals[-1] == ("finished", WurkBackend, TaskResultStatus.READY, 1)


def test_failure_without_retries_is_failed(run, task_signals):
    result = sample.fail_once_only.enqueue()
    with pytest.raises(RuntimeError):
        run()
    after = sample.fail_once_only.get_result(result.id)
    assert after.status == TaskResultStatus.FAILED and after.finished_at is not None
    assert after.errors[0].exception_class is RuntimeError
    with pytest.raises(ValueError, match="Task failed"):
        after.return_value  # noqa: B018
    assert task_signals[-1] == ("finished", WurkBackend, TaskResultStatus.FAILED, 1)


def test_last_retry_is_failed(run):
    # retry=2: failures count 0, 1, 2; the one with retry_count 1 before it is the last.
    result = sample.fail_twice_retry.enqueue()
    with pytest.raises(RuntimeError):
        run(retry_count=1, failed_at=payload.now_ms())
    assert sample.fail_twice_retry.get_result(result.id).status == TaskResultStatus.FAILED


def test_second_attempt_appends_worker_and_keeps_first_start(run, backend, queued, redis_db):
    result = sample.flaky.enqueue()
    job = queued()
    with pytest.raises(ConnectionError):
        testing.execute(job)
    first = sample.flaky.get_result(result.id)
    set_worker_id("worker-two")
    try:
        testing.execute({**job, "retry_count": 0})
    finally:
        set_worker_id(None)
    second = sample.flaky.get_result(result.id)
    assert second.status == TaskResultStatus.SUCCESSFUL
    assert second.return_value == "second time lucky"
    assert second.worker_ids == [worker_id(), "worker-two"] and second.attempts == 2
    assert second.started_at == first.started_at
    assert second.last_attempted_at >= first.last_attempted_at
    assert [e.exception_class for e in second.errors] == [ConnectionError]


def test_base_exception_is_recorded_and_handed_on_as_an_error(run):
    result = sample.exits.enqueue()
    with pytest.raises(TaskFailed) as info:
        run()
    assert isinstance(info.value.__cause__, SystemExit)
    assert sample.exits.get_result(result.id).errors[0].exception_class is SystemExit


def test_non_json_return_value_fails_the_attempt(run):
    result = sample.not_json.enqueue()
    with pytest.raises(TypeError):
        run()
    after = sample.not_json.get_result(result.id)
    assert after.errors[0].exception_class is TypeError
    assert after.status == TaskResultStatus.READY


@pytest.mark.parametrize("target", ["tests.tasks.sample.plain_function", "os.system", "no.such.module.task", None])
def test_non_task_targets_are_refused_and_never_run(run, redis_db, target):
    # DJ-020: only Task objects run; a refused payload is killed (straight to the dead set).
    result = sample.mark.enqueue("should not matter")
    with pytest.raises(RefusedTask) as info:
        run(wrapped=target)
    assert redis_db.llen("test:tasks") == 0
    assert TaskJob.retry_in(0, info.value, {}) == "kill"
    assert TaskJob.retry_in(0, ValueError("x"), {}) is None
    fields = redis_db.hgetall(f"status:{result.id}")
    assert fields[b"state"] == b"failed"


def test_a_death_marks_the_record_failed_once_with_its_error(run, redis_db):
    from wurk_django import death

    result = sample.fail.enqueue()
    with pytest.raises(ValueError):
        run()
    assert sample.fail.get_result(result.id).status == TaskResultStatus.READY  # a retry follows
    job = {"jid": result.id, "class": TaskJob.job_name, "task": {"result_ttl": 60}}

    def kill_elsewhere():  # a kill from the admin: another thread (or process) than the run's
        thread = threading.Thread(target=death.die, args=(job, death.JobKilled()),
                                  kwargs={"reason": death.MANUAL, "config": get_config()})
        thread.start()
        thread.join()

    kill_elsewhere()
    died = sample.fail.get_result(result.id)
    assert died.status == TaskResultStatus.FAILED and died.finished_at is not None
    assert [e.exception_class_path for e in died.errors] == ["builtins.ValueError",
                                                             "wurk_django.death.JobKilled"]
    kill_elsewhere()  # final: never rewritten
    assert len(sample.fail.get_result(result.id).errors) == 2


def test_expired_record_is_rebuilt_from_the_payload(run, redis_db):
    result = sample.add.enqueue(4, 5)
    redis_db.delete(f"status:{result.id}")
    run()
    done = sample.add.get_result(result.id)
    assert done.return_value == 9 and done.args == [4, 5] and done.enqueued_at is not None


def test_inline_testing_mode_runs_tasks_at_enqueue(backend, redis_db):
    with testing.inline():
        result = sample.add.enqueue(1, 1)
    assert redis_db.llen("queue:default") == 0
    assert sample.add.get_result(result.id).return_value == 2
