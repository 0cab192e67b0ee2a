"""One writer, one vocabulary: the Celery view (``AsyncResult``) and the ``django.tasks``
view (``get_result``) of a record agree at the end of every attempt, through retries, on
a real worker process (issue 41 item 5)."""

from __future__ import annotations

import pytest

from tests.results import tasks
from tests.support import wait_for
from wurk_django.celery import AsyncResult, states
from wurk_django.results import states as record_states
from wurk_django.results import store


def _ended(redis_db, jid: str, attempt: int) -> bool:
    """Attempt ``attempt`` has ended: its record left ``running`` and, unless it is final,
    its retry is booked (``retry_count`` counts from 0 at the first failure)."""
    fields = store.read(redis_db, jid) or {}
    state = record_states.of(fields.get("state"))
    if state in record_states.FINAL:
        return True
    if state is not record_states.State.RETRYING:
        return False
    return any(f'"retry_count":{attempt - 1}' in raw.decode() and jid in raw.decode()
               for raw in redis_db.zrange("retry", 0, -1))


def _django_name(task, result_id: str) -> str:
    return task.get_result(result_id).status.name


def _follow(redis_db, due, pairs, attempts: int) -> list[list[tuple[str, ...]]]:
    """At the end of each attempt, each record read through every view it has."""
    seen: list[list[tuple[str, ...]]] = []
    for attempt in range(1, attempts + 1):
        for jid, _django in pairs:
            wait_for(lambda jid=jid: _ended(redis_db, jid, attempt), timeout=60,
                     message=f"attempt {attempt} of {jid} to end")
        row = []
        for jid, django_task in pairs:
            celery = AsyncResult(jid)
            views = (celery.state,) if django_task is None else (celery.state, _django_name(django_task, jid))
            row.append(views)
            if django_task is not None:
                # The same record, two names of one state, and the same count of failed attempts.
                assert record_states.CELERY[record_states.of(store.read(redis_db, jid)["state"])] == views[0]
                assert record_states.TASKS[record_states.of(store.read(redis_db, jid)["state"])] == views[1]
                assert celery.retries == len(django_task.get_result(jid).errors)
        seen.append(row)
        for jid, _django in pairs:
            due(jid)
    return seen


@pytest.mark.slow
def test_retried_twice_then_successful_reads_the_same_in_both_views(redis_db, tasks_backend, worker, due):
    celery = tasks.celery_twice_then_ok.delay("test:celery-twice")
    django = tasks.tasks_twice_then_ok.enqueue("test:tasks-twice")
    worker()
    seen = _follow(redis_db, due, [(celery.id, None), (django.id, tasks.tasks_twice_then_ok)], 3)
    assert seen == [
        [(states.RETRY,), (states.RETRY, "READY")],
        [(states.RETRY,), (states.RETRY, "READY")],
        [(states.SUCCESS,), (states.SUCCESS, "SUCCESSFUL")],
    ]
    assert celery.get(timeout=5) == 3 and celery.retries == 2
    assert AsyncResult(django.id).get(timeout=5) == 3 == tasks.tasks_twice_then_ok.get_result(django.id).return_value


@pytest.mark.slow
def test_retries_used_up_read_failed_with_the_error_in_both_views(redis_db, tasks_backend, worker, due):
    celery = tasks.celery_never_ok.delay("test:celery-never")
    django = tasks.tasks_never_ok.enqueue("test:tasks-never")
    worker()
    seen = _follow(redis_db, due, [(celery.id, None), (django.id, tasks.tasks_never_ok)], 2)
    assert seen == [
        [(states.RETRY,), (states.RETRY, "READY")],
        [(states.FAILURE,), (states.FAILURE, "FAILED")],
    ]
    assert redis_db.zcard("dead") == 2
    for jid in (celery.id, django.id):
        # The error as stored by the one writer: its class, its message, its traceback.
        error = AsyncResult(jid).get(timeout=5, propagate=False)
        assert isinstance(error, ValueError) and str(error) == "still broken"
        assert "raise ValueError(\"still broken\")" in AsyncResult(jid).traceback
    finished = tasks.tasks_never_ok.get_result(django.id)
    assert finished.is_finished and [e.exception_class for e in finished.errors] == [ValueError, ValueError]


def test_a_revoked_task_is_finished_in_both_views(redis_db, tasks_backend):
    waiting = tasks.tasks_add.enqueue(1, 2)
    assert AsyncResult(waiting.id).revoke(by="ops") == "queued"
    assert AsyncResult(waiting.id).state == states.REVOKED
    after = tasks.tasks_add.get_result(waiting.id)
    assert after.status.name == "FAILED" and after.is_finished  # django.tasks has no other word for it
