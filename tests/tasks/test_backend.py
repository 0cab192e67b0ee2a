"""WurkBackend, producer side: enqueue, defer, priority, results, checks (DJ-011..DJ-019, DJ-023)."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
import time

import pytest

from wurk_django.tasks.compat import AVAILABLE

if not AVAILABLE:
    pytest.skip("neither django.tasks (Django 6+) nor the django-tasks backport", allow_module_level=True)

from django.db import transaction  # noqa: E402
from django.test import override_settings  # noqa: E402
from django.utils import timezone  # noqa: E402

from tests.tasks import sample  # noqa: E402
from wurk_django import payload  # noqa: E402
from wurk_django.tasks import TaskJob, WurkBackend  # noqa: E402
from wurk_django.tasks import backend as backend_module  # noqa: E402
from wurk_django.tasks.compat import (  # noqa: E402
    InvalidTask,
    TaskResultDoesNotExist,
    TaskResultMismatch,
    TaskResultStatus,
    task_backends,
    task_enqueued,
)


def test_backend_flags_and_task_class(backend):
    # DJ-011
    assert isinstance(backend, WurkBackend)
    assert backend.supports_defer and backend.supports_async_task
    assert backend.supports_get_result and backend.supports_priority
    assert backend.result_ttl == 86_400


def test_construction_does_no_redis_io(monkeypatch):
    # DJ-012: Django builds a backend per thread; none may open a connection.
    def refuse(*args, **kwargs):
        raise AssertionError("a backend opened a Redis connection while being constructed")

    monkeypatch.setattr("wurk_django.redis.connection._build", refuse)
    made: list[WurkBackend] = []

    def build():
        for _ in range(20):
            made.append(WurkBackend("default", {"OPTIONS": {"RESULT_TTL": 60}}))

    threads = [threading.Thread(target=build) for _ in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 100
    assert all(b.result_ttl == 60 for b in made)


def test_enqueue_pushes_a_sidekiq_job_whose_jid_is_the_result_id(backend, queued, redis_db):
    # DJ-013, DJ-024
    result = sample.add.enqueue(1, 2)
    assert result.status == TaskResultStatus.READY
    assert result.enqueued_at is not None and result.started_at is None
    assert len(result.id) == 24 and int(result.id, 16) >= 0
    assert redis_db.smembers("queues") == {b"default"}
    job = queued()
    assert job["jid"] == result.id
    assert job["class"] == "wurk_django.tasks.TaskJob" == TaskJob.job_name
    assert job["wrapped"] == job["display_class"] == "tests.tasks.sample.add"
    assert job["args"] == [[1, 2], {}]
    assert job["queue"] == "default" and job["retry"] is True
    assert isinstance(job["created_at"], int) and isinstance(job["enqueued_at"], int)
    assert job["task"]["priority"] == 0 and job["task"]["backend"] == "default"


def test_enqueue_sends_task_enqueued(backend):
    seen = []

    def receiver(sender, task_result, **kwargs):
        seen.append((sender, task_result.id, task_result.enqueued_at))

    task_enqueued.connect(receiver)
    try:
        result = sample.echo.enqueue("x", k=1)
    finally:
        task_enqueued.disconnect(receiver)
    assert seen == [(WurkBackend, result.id, result.enqueued_at)]


def test_get_result_round_trips_the_task_and_arguments(backend):
    # DJ-018
    result = sample.echo.enqueue(1, (2, 3), b"four", k={"nested": [1]})
    again = sample.echo.get_result(result.id)
    assert again.task.func is sample.echo.func
    assert again.status == TaskResultStatus.READY
    assert again.args == [1, [2, 3], "four"]
    assert again.kwargs == {"k": {"nested": [1]}}
    assert again.enqueued_at == result.enqueued_at
    assert again.errors == [] and again.worker_ids == []
    with pytest.raises(ValueError, match="not finished"):
        again.return_value  # noqa: B018
    assert backend.get_result(result.id).id == result.id


def test_unknown_malformed_and_mismatched_ids(backend):
    result = sample.add.enqueue(1, 1)
    for bad in ("0" * 24, "123", 123, "ZZZ" + result.id[3:], result.id.upper()):
        with pytest.raises(TaskResultDoesNotExist):
            backend.get_result(bad)
    with pytest.raises(TaskResultMismatch):
        sample.echo.get_result(result.id)


def test_run_after_goes_to_the_schedule_set(backend, redis_db):
    # DJ-014
    when = timezone.now() + dt.timedelta(hours=1)
    result = sample.add.using(run_after=when).enqueue(2, 2)
    assert redis_db.llen("queue:default") == 0
    [(raw, score)] = redis_db.zrange("schedule", 0, -1, withscores=True)
    assert score == pytest.approx(when.timestamp(), abs=0.001)
    job = payload.loads(raw)
    assert job["jid"] == result.id and "at" not in job
    fetched = backend.get_result(result.id)
    assert fetched.status == TaskResultStatus.READY
    assert fetched.task.run_after == when


def test_a_timedelta_run_after_counts_from_the_push(backend, redis_db):
    # DJ-014: run_after=timedelta is now + delta, taken when the task is enqueued.
    deferred = sample.add.using(run_after=dt.timedelta(hours=2))
    before = timezone.now()
    result = deferred.enqueue(3, 4)
    after = timezone.now()
    assert redis_db.llen("queue:default") == 0
    [(raw, score)] = redis_db.zrange("schedule", 0, -1, withscores=True)
    assert (before + dt.timedelta(hours=2)).timestamp() <= score <= (after + dt.timedelta(hours=2)).timestamp()
    assert payload.loads(raw)["jid"] == result.id
    assert isinstance(result.task.run_after, dt.datetime)
    assert backend.get_result(result.id).status == TaskResultStatus.READY


@override_settings(USE_TZ=False, TIME_ZONE="Europe/Paris")
def test_naive_run_after_is_read_in_time_zone(backend, redis_db):
    # DJ-014: naive only without USE_TZ, in TIME_ZONE.
    when = dt.datetime(2040, 6, 1, 12, 0, 0)
    sample.add.using(run_after=when).enqueue(1, 1)
    [(_, score)] = redis_db.zrange("schedule", 0, -1, withscores=True)
    assert score == dt.datetime(2040, 6, 1, 10, 0, 0, tzinfo=dt.UTC).timestamp()


def test_positive_priority_goes_to_the_fetch_end(backend, redis_db):
    # DJ-015: workers take from the right; priority > 0 is RPUSHed there, others LPUSHed.
    low = sample.add.enqueue(1, 1)
    zero = sample.add.using(priority=-5).enqueue(2, 2)
    high = sample.add.using(priority=10).enqueue(3, 3)
    order = [payload.loads(raw)["jid"] for raw in redis_db.lrange("queue:default", 0, -1)]
    assert order == [zero.id, low.id, high.id]
    assert backend.get_result(high.id).task.priority == 10
    assert payload.loads(redis_db.lindex("queue:default", -1))["task"]["priority"] == 10


def test_invalid_queue_raises_before_any_redis_write(settings, redis_db):
    # DJ-016
    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend", "QUEUES": []}}
    other = sample.add.using(queue_name="other")
    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend", "QUEUES": ["default"]}}
    with pytest.raises(InvalidTask, match="other"):
        other.enqueue(1, 2)
    assert redis_db.dbsize() == 0


def test_queue_names_follow_queues_setting(settings, queued):
    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend", "QUEUES": ["default", "mail"]}}
    result = sample.add.using(queue_name="mail").enqueue(1, 2)
    assert queued("mail")["jid"] == result.id


def test_non_json_arguments_fail_before_any_write(backend, redis_db):
    with pytest.raises(TypeError):
        sample.echo.enqueue(object())
    with pytest.raises(ValueError, match="native JSON"):
        sample.echo.enqueue({1: "int key"})
    assert redis_db.dbsize() == 0


def test_aenqueue_and_aget_result_use_redis_asyncio(backend, monkeypatch, queued):
    # DJ-017: the native path never falls back to a thread.
    def forbidden(*args, **kwargs):
        raise AssertionError("sync_to_async was used")

    monkeypatch.setattr(backend_module, "sync_to_async", forbidden)

    async def go():
        result = await sample.add.aenqueue(20, 22)
        fetched = await sample.add.aget_result(result.id)
        high = await sample.add.using(priority=1).aenqueue(0, 0)
        return result, fetched, high

    result, fetched, high = asyncio.run(go())
    assert fetched.id == result.id and fetched.args == [20, 22]
    assert fetched.status == TaskResultStatus.READY and fetched.enqueued_at == result.enqueued_at
    assert queued()["jid"] == high.id  # RPUSHed, so popped first
    assert queued()["jid"] == result.id


def test_aget_result_unknown_id(backend):
    async def go():
        with pytest.raises(TaskResultDoesNotExist):
            await backend.aget_result("f" * 24)
        with pytest.raises(TaskResultDoesNotExist):
            await backend.aget_result(123)

    asyncio.run(go())


def test_results_expire_after_result_ttl(settings, redis_db):
    # DJ-019
    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend", "OPTIONS": {"RESULT_TTL": 1}}}
    result = sample.add.enqueue(1, 2)
    assert 0 < redis_db.pttl(f"status:{result.id}") <= 1000
    assert sample.add.get_result(result.id).status == TaskResultStatus.READY
    time.sleep(1.2)
    with pytest.raises(TaskResultDoesNotExist):
        sample.add.get_result(result.id)


def test_default_result_ttl_is_a_day(backend, redis_db):
    result = sample.add.enqueue(1, 2)
    assert 86_000 < redis_db.ttl(f"status:{result.id}") <= 86_400


def test_retry_option_and_per_task_retry(settings, queued):
    # DJ-022
    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend", "OPTIONS": {"RETRY": 5}}}
    sample.add.enqueue(1, 1)
    assert queued()["retry"] == 5
    sample.fail_once_only.enqueue()
    assert queued()["retry"] is False


def test_invalid_per_task_retry_is_refused(backend):
    with pytest.raises(InvalidTask, match="retry"):
        sample.fail_once_only.__class__(func=sample.plain_function, retry=-1)


# -- deadlines (issue 47 item 5) -----------------------------------------------------


def test_using_deadline_travels_as_epoch_seconds_and_keeps_djangos_options(backend, queued, redis_db):
    at = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    task = sample.mark_by.using(deadline=at, priority=3, queue_name="default")
    assert (task.deadline, task.priority, task.deadline_action) == (at, 3, None)
    result = task.enqueue("x")
    job = queued()
    assert job["deadline"] == at.timestamp() and "deadline_action" not in job
    assert job["task"]["deadline"] == at.timestamp()
    assert backend.get_result(result.id).task.deadline == at  # read back from the record
    sample.mark_by.using(deadline=at.timestamp(), deadline_action="discard").enqueue("y")
    job = queued()
    assert job["deadline"] == at.timestamp() and job["deadline_action"] == "discard"
    sample.mark_by.enqueue("z")
    job = queued()
    assert "deadline" not in job and "deadline" not in job["task"]  # without one: as before


@pytest.mark.parametrize(("options", "match"), [
    ({"deadline": dt.datetime(2099, 1, 1, 9, 0)}, r"naive datetime\.datetime\(2099, 1, 1, 9, 0\)"),
    ({"deadline": "tomorrow"}, "'tomorrow'"),
    ({"deadline": 600}, "absolute time .* not 600"),
    ({"deadline": time.time() + 3600, "deadline_action": "later"}, "deadline_action.*'later'"),
])
def test_a_bad_deadline_is_refused_at_using_naming_it(backend, options, match):
    from wurk_django.tasks import InvalidDeadline

    with pytest.raises(ValueError, match=match) as caught:
        sample.mark_by.using(**options)
    assert isinstance(caught.value, InvalidDeadline) and isinstance(caught.value, InvalidTask)


def test_a_run_after_past_the_deadline_is_refused_at_enqueue(backend, redis_db):
    soon = time.time() + 60
    with pytest.raises(ValueError, match="after its deadline"):
        sample.mark_by.using(deadline=soon, run_after=dt.timedelta(minutes=5)).enqueue("x")
    assert redis_db.dbsize() == 0


# -- after commit by default (DJ-023, issue 45 item 1) ----------------------------------


@pytest.mark.django_db(transaction=True)
def test_inside_atomic_a_task_is_pushed_when_it_commits_by_default(backend, redis_db, queued):
    # Before: pushed at once, so a worker could run it before the rows it reads were committed.
    with transaction.atomic():
        result = sample.add.enqueue(1, 2)
        assert redis_db.dbsize() == 0
        # The caller's result is usable now: READY, with its final id.
        assert result.status == TaskResultStatus.READY and not result.is_finished
        assert result.enqueued_at is None
        with pytest.raises(TaskResultDoesNotExist):  # nothing to find until it is pushed
            sample.add.get_result(result.id)
    assert result.enqueued_at is not None
    assert queued()["jid"] == result.id
    assert sample.add.get_result(result.id).status == TaskResultStatus.READY


@pytest.mark.django_db(transaction=True)
def test_a_rollback_pushes_nothing_by_default(backend, redis_db):
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            sample.add.enqueue(1, 2)
            raise RuntimeError("roll back")
    assert redis_db.dbsize() == 0


@pytest.mark.django_db(transaction=True)
def test_a_rolled_back_savepoint_drops_only_its_tasks(backend, redis_db, queued):
    with transaction.atomic():
        kept = sample.add.enqueue(1, 2)
        try:
            with transaction.atomic():
                sample.add.enqueue(3, 4)
                raise RuntimeError("inner")
        except RuntimeError:
            pass
    assert queued()["jid"] == kept.id
    assert redis_db.llen("queue:default") == 0


def test_outside_a_transaction_a_task_is_pushed_at_once_without_touching_the_database(backend, redis_db,
                                                                                     queued):
    # No django_db mark: opening a database connection here would fail the test.
    result = sample.add.enqueue(1, 2)
    assert queued()["jid"] == result.id and result.enqueued_at is not None


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("where", ["OPTIONS", "WURK"])
def test_enqueue_on_commit_false_pushes_at_once_inside_atomic(settings, redis_db, queued, where):
    if where == "OPTIONS":
        settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend",
                                      "OPTIONS": {"ENQUEUE_ON_COMMIT": False}}}
    else:  # the global setting, set, is the backend's default
        settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"}}
        settings.WURK = {**settings.WURK, "ENQUEUE_ON_COMMIT": False}
    with transaction.atomic():
        result = sample.add.enqueue(1, 2)
        assert queued()["jid"] == result.id


@pytest.mark.django_db(transaction=True)
def test_the_backends_option_wins_over_the_wurk_setting(settings, redis_db):
    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend",
                                  "OPTIONS": {"ENQUEUE_ON_COMMIT": True}}}
    settings.WURK = {**settings.WURK, "ENQUEUE_ON_COMMIT": False}
    with transaction.atomic():
        sample.add.enqueue(1, 2)
        assert redis_db.llen("queue:default") == 0
    assert redis_db.llen("queue:default") == 1


@pytest.mark.django_db(transaction=True)
def test_arguments_are_checked_at_the_call_inside_atomic(backend, redis_db):
    with transaction.atomic():
        with pytest.raises(ValueError, match="native JSON"):
            sample.echo.enqueue({1: "x"})
        sample.add.enqueue(1, 2)
        assert redis_db.llen("queue:default") == 0
    assert redis_db.llen("queue:default") == 1


@pytest.mark.django_db(transaction=True)
def test_aenqueue_inside_atomic_waits_for_the_commit(backend, redis_db, queued):
    # Sync code in atomic() awaiting aenqueue through async_to_sync: the coroutine runs in
    # another thread, the transaction is the caller's.
    from asgiref.sync import async_to_sync

    with transaction.atomic():
        result = async_to_sync(sample.add.aenqueue)(1, 2)
        assert result.status == TaskResultStatus.READY
        assert redis_db.dbsize() == 0
    assert queued()["jid"] == result.id
    assert sample.add.get_result(result.id).status == TaskResultStatus.READY


@pytest.mark.django_db(transaction=True)
def test_aenqueue_inside_a_rolled_back_atomic_pushes_nothing(backend, redis_db):
    from asgiref.sync import async_to_sync

    with pytest.raises(RuntimeError):
        with transaction.atomic():
            async_to_sync(sample.add.aenqueue)(1, 2)
            raise RuntimeError("roll back")
    assert redis_db.dbsize() == 0


@pytest.mark.django_db(transaction=True)
def test_aenqueue_from_an_async_view_in_sync_to_async_atomic_code(backend, redis_db, queued):
    # An async view running its writes in sync_to_async(atomic code) that awaits the task.
    from asgiref.sync import async_to_sync, sync_to_async

    def save_and_enqueue():
        with transaction.atomic():
            result = async_to_sync(sample.add.aenqueue)(1, 2)
            assert redis_db.dbsize() == 0
            return result

    async def view():
        return await sync_to_async(save_and_enqueue)()

    result = asyncio.run(view())
    assert queued()["jid"] == result.id


def test_backend_check_reports_bad_options(settings):
    settings.TASKS = {"default": {
        "BACKEND": "wurk_django.tasks.WurkBackend",
        "QUEUES": ["default", "bad\nqueue"],
        "OPTIONS": {"RESULT_TTL": 0, "RETRY": -1, "RESLUT_TTL": 5, "ENQUEUE_ON_COMMIT": "yes"},
    }}
    ids = sorted(m.id for m in task_backends["default"].check())
    assert ids == ["wurk.E030", "wurk.E031", "wurk.E031", "wurk.E031", "wurk.E032"]
    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend", "OPTIONS": {"RESULT_TTL": 60}}}
    assert list(task_backends["default"].check()) == []
