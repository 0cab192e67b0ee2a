"""Pushing after commit: jid at once, push at commit, nothing on rollback, arguments checked at the call (DJ-030, CORE-091)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.db import transaction

from tests.jobsapp.jobs import RecordJob
from wurk_django import payload

pytestmark = pytest.mark.django_db(transaction=True)


def _queued(redis_db) -> list[dict]:
    return [payload.loads(raw) for raw in redis_db.lrange("queue:default", 0, -1)]


def test_on_commit_push_waits_for_commit_and_keeps_the_jid(redis_db):
    with transaction.atomic():
        jid = RecordJob.set(on_commit=True).perform_async("after commit")
        assert isinstance(jid, str) and len(jid) == 24
        assert redis_db.dbsize() == 0
    [job] = _queued(redis_db)
    assert job["jid"] == jid and job["args"] == ["after commit"]


def test_rollback_pushes_nothing(redis_db):
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            RecordJob.set(on_commit=True).perform_async("never")
            RecordJob.set(on_commit=True).perform_in(60, "never either")
            raise RuntimeError("roll back")
    assert redis_db.dbsize() == 0


def test_rolled_back_savepoint_drops_only_its_pushes(redis_db):
    with transaction.atomic():
        RecordJob.set(on_commit=True).perform_async("kept")
        try:
            with transaction.atomic():
                RecordJob.set(on_commit=True).perform_async("dropped")
                raise RuntimeError("inner")
        except RuntimeError:
            pass
    assert [j["args"] for j in _queued(redis_db)] == [["kept"]]


def test_bad_arguments_raise_at_the_call_site(redis_db):
    with transaction.atomic():
        with pytest.raises(ValueError, match=r"native JSON.*args\[0\]"):
            RecordJob.set(on_commit=True).perform_async(dt.datetime(2024, 1, 1))
        RecordJob.set(on_commit=True).perform_async("fine")
    assert [j["args"] for j in _queued(redis_db)] == [["fine"]]


def test_warn_mode_coerces_at_the_call_site(redis_db, settings):
    settings.WURK = {**settings.WURK, "ON_COMPLEX_ARGUMENTS": "warn"}
    with transaction.atomic():
        RecordJob.set(on_commit=True).perform_async(dt.date(2024, 1, 2))
    assert [j["args"] for j in _queued(redis_db)] == [["2024-01-02"]]


def test_enqueue_on_commit_setting_defers_immediate_and_scheduled_pushes(redis_db, settings):
    settings.WURK = {**settings.WURK, "ENQUEUE_ON_COMMIT": True}
    with transaction.atomic():
        jid = RecordJob.perform_async("now")
        later = RecordJob.perform_in(3600, "later")
        assert redis_db.dbsize() == 0
    assert [j["jid"] for j in _queued(redis_db)] == [jid]
    [raw] = redis_db.zrange("schedule", 0, -1)
    assert payload.loads(raw)["jid"] == later


def test_enqueue_on_commit_setting_rollback(redis_db, settings):
    settings.WURK = {**settings.WURK, "ENQUEUE_ON_COMMIT": True}
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            RecordJob.perform_async("never")
            raise RuntimeError("roll back")
    assert redis_db.dbsize() == 0


def test_outside_a_transaction_the_push_is_immediate(redis_db):
    jid = RecordJob.set(on_commit=True).perform_async("at once")
    assert [j["jid"] for j in _queued(redis_db)] == [jid]


def test_on_commit_using_another_alias_name_is_passed_through(redis_db):
    # on_commit="default" names the database whose commit releases the push.
    with transaction.atomic(using="default"):
        jid = RecordJob.set(on_commit="default").perform_async("x")
        assert redis_db.dbsize() == 0
    assert [j["jid"] for j in _queued(redis_db)] == [jid]


@pytest.mark.django_db(transaction=False)
def test_under_testcase_semantics_capture_on_commit_callbacks(redis_db, django_capture_on_commit_callbacks):
    # TestCase never commits; capturing the callbacks with execute=True runs the push.
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        jid = RecordJob.set(on_commit=True).perform_async("captured")
        assert redis_db.dbsize() == 0
    assert len(callbacks) == 1
    assert [j["jid"] for j in _queued(redis_db)] == [jid]


# -- perform_bulk --------------------------------------------------------------------------


def test_bulk_on_commit_returns_the_jids_at_once_and_pushes_at_commit(redis_db):
    with transaction.atomic():
        jids = RecordJob.set(on_commit=True).perform_bulk([["a"], ["b"], ["c"]])
        assert len(set(jids)) == 3 and all(isinstance(j, str) and len(j) == 24 for j in jids)
        assert redis_db.dbsize() == 0
    queued = _queued(redis_db)
    assert sorted(j["jid"] for j in queued) == sorted(jids)
    assert {j["jid"]: j["args"] for j in queued} == dict(zip(jids, [["a"], ["b"], ["c"]], strict=True))


def test_bulk_on_commit_rollback_pushes_nothing(redis_db):
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            RecordJob.set(on_commit=True).perform_bulk([["x"], ["y"]], at=3600)
            raise RuntimeError("roll back")
    assert redis_db.dbsize() == 0


def test_bulk_enqueue_on_commit_setting_defers_scheduled_bulk(redis_db, settings):
    settings.WURK = {**settings.WURK, "ENQUEUE_ON_COMMIT": True}
    with transaction.atomic():
        jids = RecordJob.perform_bulk([["x"], ["y"]], at=3600)
        assert redis_db.dbsize() == 0
    assert sorted(payload.loads(raw)["jid"] for raw in redis_db.zrange("schedule", 0, -1)) == sorted(jids)


@pytest.mark.parametrize(("args_list", "options", "match"), [
    ([["ok"], [object()]], {}, "object"),
    ([["ok"], "not a list"], {}, "list of lists"),
    ([["a"], ["b"]], {"at": [1.0]}, "'at' has 1 entries"),
    ([["a"]], {"batch_size": 0}, "batch_size"),
])
def test_bulk_on_commit_bad_input_raises_at_the_call_site(redis_db, args_list, options, match):
    with transaction.atomic():
        with pytest.raises((ValueError, TypeError), match=match):
            RecordJob.set(on_commit=True).perform_bulk(args_list, **options)
    assert redis_db.dbsize() == 0


def test_bulk_outside_a_transaction_is_immediate(redis_db):
    jids = RecordJob.set(on_commit=True).perform_bulk([["now"]])
    assert [j["jid"] for j in _queued(redis_db)] == jids


def test_perform_async_on_commit_is_the_on_commit_push(redis_db):
    # DJ-030's names: perform_async_on_commit (class, set() and @job) and TRANSACTIONAL_PUSH.
    from tests.jobsapp.jobs import record_fn_for_on_commit

    with transaction.atomic():
        jid = RecordJob.perform_async_on_commit("class")
        chained = RecordJob.set(queue="default").perform_async_on_commit("setter")
        function = record_fn_for_on_commit.perform_async_on_commit("function")
        assert redis_db.dbsize() == 0
    assert sorted(j["jid"] for j in _queued(redis_db)) == sorted([jid, chained, function])
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            RecordJob.perform_async_on_commit("never")
            raise RuntimeError("roll back")
    assert len(_queued(redis_db)) == 3


def test_transactional_push_is_another_name_for_enqueue_on_commit(redis_db, settings):
    settings.WURK = {**settings.WURK, "TRANSACTIONAL_PUSH": True}
    with pytest.raises(RuntimeError):
        with transaction.atomic():
            RecordJob.perform_async("never")
            RecordJob.perform_bulk([["never"]])
            raise RuntimeError("roll back")
    assert redis_db.dbsize() == 0
    with transaction.atomic():
        jid = RecordJob.perform_async("at commit")
        assert redis_db.dbsize() == 0
    assert [j["jid"] for j in _queued(redis_db)] == [jid]
