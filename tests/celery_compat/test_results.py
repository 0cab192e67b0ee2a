"""``AsyncResult`` over ``status:<jid>`` records; eager runs (issue 27 item 2)."""

from __future__ import annotations

import builtins
import threading

import pytest

from tests.celery_compat.tasks import Flaky, Refused, add, bound_retry, fail, greet, introspect, progress, slow
from tests.support import wait_for
from wurk_django import testing
from wurk_django.celery import AsyncResult, TaskError, TimeoutError, states
from wurk_django.celery.result import rebuild


def test_get_times_out_while_nothing_runs_the_task(redis_db):
    result = add.delay(1, 2)
    with pytest.raises(TimeoutError, match="not ready after 0.2 s"):
        result.get(timeout=0.2)
    assert issubclass(TimeoutError, builtins.TimeoutError)  # code catching the builtin still catches it


def test_get_waits_for_a_running_worker_and_sees_progress(redis_db):
    from wurk_django.conf import Config
    from wurk_django.server.launcher import Launcher

    result = slow.delay("test:slow")
    reporting = progress.delay("test:progress")
    launcher = Launcher(Config(queues=["default"]), embedded=True)
    launcher.run()
    try:
        wait_for(lambda: redis_db.lrange("test:slow", 0, -1), timeout=30, message="the task to start")
        assert result.state == states.STARTED and not result.ready()
        wait_for(lambda: redis_db.lrange("test:progress", 0, -1), timeout=30, message="the progress report")
        assert reporting.state == "PROGRESS" and reporting.info == {"done": 1} and not reporting.ready()
        redis_db.set("test:progress:go", 1)
        releaser = threading.Timer(0.3, lambda: redis_db.set("test:slow:go", 1))
        releaser.start()
        assert result.get(timeout=30) == "slow done"
        releaser.join()
        assert reporting.get(timeout=30) == "ok" and reporting.state == states.SUCCESS
    finally:
        launcher.stop()
    assert result.successful() and result.ready() and result.date_done is not None


def test_request_on_the_worker_and_the_stored_value(redis_db, drain):
    result = introspect.apply_async((1,), {"b": [2]}, queue="celery_kw")
    drain()
    assert result.get(timeout=5) == {"id": result.id, "task": "tests.celery_compat.tasks.introspect", "args": [1],
                                     "kwargs": {"b": [2]}, "retries": 0, "queue": "celery_kw", "eager": False,
                                     "name": "tests.celery_compat.tasks.introspect"}


def test_failure_propagates_or_is_returned(redis_db, drain):
    result = fail.delay(3, "no")
    drain()
    assert result.state == states.FAILURE and result.failed() and result.ready() and not result.successful()
    with pytest.raises(Refused):
        result.get()
    error = result.get(propagate=False)
    assert isinstance(error, Refused) and error.code == 3
    assert "raise Refused(code, why)" in result.traceback
    result.forget()
    assert result.state == states.PENDING


def test_an_error_class_this_process_may_not_import_reads_as_task_error():
    error = rebuild({"exception_class_path": "evil.module.Boom", "message": "bang", "traceback": "tb"})
    assert isinstance(error, TaskError) and error.exception_class_path == "evil.module.Boom"
    assert isinstance(rebuild({"exception_class_path": "builtins.KeyError", "args": ["k"]}), KeyError)
    assert isinstance(rebuild({"exception_class_path": "tests.celery_compat.tasks.Refused", "message": "x"}),
                      TaskError)  # its constructor wants two arguments and only a message is stored


def test_get_refuses_inside_a_job(redis_db):
    from types import SimpleNamespace

    from wurk_django import context
    from wurk_django.conf import get_config

    ctx = context.JobContext(get_config(), redis_db, unit=SimpleNamespace())
    with context.scope(ctx), pytest.raises(RuntimeError, match="inside a job"):
        AsyncResult("d" * 24).get(timeout=0.1)


# -- run in this process ------------------------------------------------------------


def test_apply_runs_here_with_retries_at_once(redis_db):
    assert add.apply((2, 2)).get() == 4
    result = bound_retry.apply(("test:eager",))
    assert result.get() == 2 and redis_db.llen("test:eager") == 3
    failed = fail.apply((1, "x"))
    assert failed.state == states.FAILURE
    with pytest.raises(Refused):
        failed.get()
    assert introspect.apply((1,)).get()["eager"] is True
    with pytest.raises(TypeError):
        add.apply((1,))  # never ran: the caller's error
    assert redis_db.llen("queue:default") == 0 and redis_db.zcard("retry") == 0


def test_inline_mode_is_always_eager(redis_db):
    with testing.inline():
        assert greet.delay("eve", punctuation="?").get(timeout=1) == "hello eve?"
        with pytest.raises(Flaky):
            from tests.celery_compat.tasks import gives_up

            gives_up.delay()  # an eager task's error reaches the caller (task_eager_propagates)
    assert redis_db.llen("queue:celery_kw") == 0


def test_fake_mode_records_then_drains(redis_db):
    with testing.fake():
        result = add.delay(5, 6)
        greeting = greet.delay("ann", greeting="hey")
        assert result.state == states.PENDING
        assert testing.jobs(greet)[0]["kwargs"] == {"greeting": "hey"}
        testing.drain(add)
        testing.drain(greet)
        assert result.get(timeout=1) == 11 and greeting.get(timeout=1) == "hey ann!"
    testing.clear_all()


@pytest.mark.slow
def test_a_worker_process_runs_tasks_by_name(redis_db, worker_factory):
    """A fresh ``manage.py wurk`` process finds the task by its name and calls it with its kwargs.
    (tests.celery_compat is no installed app: the worker may import it only when told to.)"""
    import json

    result = greet.delay("zoe", greeting="hi")
    failed = add.delay(1, "x")  # a TypeError inside the task: no retry option covers it
    worker_factory("-c", "2", "-q", "default", "-q", "celery_kw",
                   env={"WURK_TEST_EXTRA": json.dumps({"IMPORT_ON_MISS": ["tests.celery_compat"]})})
    assert result.get(timeout=60) == "hi zoe!"
    with pytest.raises(TypeError, match="unsupported operand"):
        failed.get(timeout=60)


def test_update_state_runs_here_too(redis_db):
    assert progress.apply(("test:progress",)).get() == "ok"
    assert redis_db.lrange("test:progress", 0, -1) == [b"reported"]


def test_a_task_past_its_expires_is_skipped_and_reads_revoked(redis_db, drain):
    import datetime as dt

    from wurk_django.celery import TaskRevokedError

    result = add.apply_async((1, 2), expires=dt.datetime.now(dt.UTC) - dt.timedelta(seconds=1))
    kept = add.apply_async((1, 2), expires=3600)
    drain()
    assert result.state == states.REVOKED and result.ready() and not result.successful()
    with pytest.raises(TaskRevokedError):
        result.get(timeout=5)
    assert kept.get(timeout=5) == 3


def test_a_record_write_redis_refuses_never_fails_the_task(redis_db, drain, monkeypatch):
    import redis as redis_lib

    from wurk_django.results import store

    real_write, calls = store.write, []

    def first_write_down(*args, **kwargs):
        calls.append(args)
        if len(calls) == 1:  # the attempt's start: Redis refuses it
            raise redis_lib.ConnectionError("blip")
        return real_write(*args, **kwargs)

    monkeypatch.setattr(store, "write", first_write_down)
    result = add.delay(20, 22)
    drain()
    assert result.get(timeout=5) == 42
    assert redis_db.zcard("retry") == 0 and redis_db.zcard("dead") == 0


def test_revoke_cancels_a_waiting_task_and_its_result_reads_revoked(redis_db):
    """Issue 27 items 2 and 4: ``AsyncResult.revoke()`` as in Celery: the queued task goes to
    the dead set naming who revoked it, and ``get`` raises ``TaskRevokedError``."""
    from wurk_django.api import DeadSet
    from wurk_django.celery import TaskRevokedError

    result = add.delay(1, 2)
    assert result.revoke(by="ops") == "queued"
    assert redis_db.llen("queue:default") == 0
    assert result.state == states.REVOKED and result.ready()
    with pytest.raises(TaskRevokedError):
        result.get(timeout=1)
    [entry] = list(DeadSet())
    assert entry.jid == result.id and "ops" in entry.item["error_message"]
