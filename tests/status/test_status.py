"""Job status and progress for any job class that opts in (issue 47 item 2), on a real
worker process: what a tracked job's record says from its push to its end, read from
this (another) process with ``wurk_django.status.get``."""

from __future__ import annotations

import json

import pytest

from tests.status import jobs
from tests.support import wait_for
from wurk_django import status
from wurk_django.celery import AsyncResult
from wurk_django.job import Job
from wurk_django.results import store


def _state(jid: str) -> str | None:
    found = status.get(jid)
    return found.state if found is not None else None


def _reaches(jid: str, state: str, timeout: float = 60) -> status.Status:
    wait_for(lambda: _state(jid) == state, timeout=timeout, message=f"{jid} to read {state}")
    return status.get(jid)


# -- the push --------------------------------------------------------------------------


def test_a_tracked_push_writes_its_first_record_with_the_job(redis_db):
    jid = jobs.Steps.perform_async("push")
    raw = json.loads(redis_db.lrange("queue:default", 0, -1)[0])
    assert raw["track"] == 86_400  # True became WURK["TRACK_TTL"], a number Ruby ignores
    seen = status.get(jid)
    assert (seen.state, seen.job_class, seen.progress, seen.attempts) == ("enqueued", "tests.status.jobs.Steps",
                                                                         None, 0)
    assert seen.enqueued_at is not None and seen.started_at is None and not seen.finished
    assert 86_300 < redis_db.ttl(store.key(jid)) <= 86_400


def test_a_tracked_scheduled_push_reads_scheduled_and_a_class_ttl_is_kept(redis_db):
    jid = jobs.Once.perform_in(600)
    assert _state(jid) == "scheduled"
    assert 0 < redis_db.ttl(store.key(jid)) <= 120


def test_per_push_opt_in_and_opt_out(redis_db):
    on = jobs.Untracked.set(track=300).perform_async("k")
    off = jobs.Steps.set(track=False).perform_async("k")
    assert _state(on) == "enqueued" and 0 < redis_db.ttl(store.key(on)) <= 300
    assert status.get(off) is None
    assert "track" not in json.loads(redis_db.lrange("queue:default", 0, -1)[0])  # the last push: off


def test_a_bulk_push_writes_each_record_in_its_round_trip(redis_db):
    jids = jobs.Steps.perform_bulk([["a"], ["b"], ["c"]])
    assert [_state(jid) for jid in jids] == ["enqueued"] * 3


def test_bad_values_are_refused_where_they_are_given():
    with pytest.raises(ValueError, match="'track' must be"):
        jobs.Untracked.set(track=-5).perform_async("k")
    with pytest.raises(TypeError, match="'track' must be"):
        type("BadTrack", (Job,), {"__module__": __name__, "track": "yes", "perform": lambda self: None})
    with pytest.raises(ValueError, match="from 0 to 100"):
        status.progress(150)
    with pytest.raises(ValueError, match="cannot name a result"):
        status.get("no spaces allowed")


def test_an_untracked_push_carries_nothing_more(redis_db):
    from wurk_django.client.planning import NONE
    from wurk_django.client.push import Client

    planned = Client().plan({"class": jobs.Untracked, "args": ["k"]})
    assert planned.companions is NONE and planned.extra == [] and "track" not in planned.job
    jid = jobs.Untracked.perform_async("k")
    assert status.get(jid) is None and not redis_db.keys("status:*")


# -- a run on a real worker -------------------------------------------------------------


@pytest.mark.slow
def test_three_progress_steps_are_seen_mid_run_then_the_result_and_timings(redis_db, worker):
    jid = jobs.Steps.perform_async("steps")
    worker()
    seen = []
    for step in (1, 2, 3):
        wait_for(lambda step=step: (status.get(jid).progress or 0) >= step * 30, timeout=60,
                 message=f"step {step}")
        now = status.get(jid)
        seen.append((now.state, now.progress, now.message))
        redis_db.set(f"go:steps:{step}", 1)
    assert seen == [("running", 30, "step 1"), ("running", 60, "step 2"), ("running", 90, "step 3")]
    done = _reaches(jid, "complete")
    assert (done.result, done.progress, done.attempts, done.error) == ({"key": "steps", "steps": 3}, 100, 1, None)
    assert done.finished and done.enqueued_at <= done.started_at <= done.progress_at <= done.finished_at
    assert 0 < redis_db.ttl(store.key(jid)) <= 86_400
    # The Celery view of the same record: SUCCESS and the value.
    assert AsyncResult(jid).state == "SUCCESS" and AsyncResult(jid).get(timeout=5) == {"key": "steps", "steps": 3}


@pytest.mark.slow
def test_a_failure_reads_retrying_then_failed_with_its_error(redis_db, worker, due):
    jid = jobs.Flaky.perform_async("f")
    worker()
    retrying = _reaches(jid, "retrying")
    assert retrying.error == {"class": "builtins.ValueError", "message": "broken f"}
    assert retrying.finished_at is None and not retrying.finished and retrying.progress == 50
    wait_for(lambda: due(jid), timeout=30, message="the retry to be booked")
    dead = _reaches(jid, "failed")
    assert dead.finished and dead.finished_at is not None and dead.attempts == 2 and len(dead.errors) == 2
    assert any(json.loads(raw)["jid"] == jid for raw in redis_db.zrange("dead", 0, -1))


@pytest.mark.slow
def test_no_retries_read_failed_at_once_and_a_value_json_cannot_carry_is_noted(redis_db, worker):
    once = jobs.Once.perform_async()
    odd = jobs.Unjsonable.perform_async()
    worker()
    assert _reaches(once, "failed").error["class"] == "builtins.RuntimeError"
    assert 0 < redis_db.ttl(store.key(once)) <= 120
    done = _reaches(odd, "complete")
    assert done.result is None and done.result_note.startswith("not kept: not JSON")


@pytest.mark.slow
def test_untracked_jobs_on_a_worker_write_no_record(redis_db, worker):
    jid = jobs.Untracked.perform_async("count")
    worker()
    wait_for(lambda: redis_db.get("count") == b"1", timeout=60, message="the untracked job to run")
    wait_for(lambda: not redis_db.llen("queue:default"), timeout=10)
    assert status.get(jid) is None and not redis_db.keys("status:*")


@pytest.mark.slow
def test_celery_update_state_and_status_read_the_same_record(redis_db, worker):
    result = jobs.celery_counts.delay("celery")
    worker()
    wait_for(lambda: AsyncResult(result.id).state == "PROGRESS", timeout=60, message="PROGRESS")
    seen = status.get(result.id)
    assert (seen.state, seen.progress, seen.message) == ("running", 30, "three of ten")
    assert AsyncResult(result.id).info == {"current": 3, "total": 10, "status": "three of ten"}
    redis_db.set("go:celery", 1)
    assert result.get(timeout=60) == "counted"
    assert status.get(result.id).state == "complete" and status.get(result.id).result == "counted"


@pytest.mark.slow
def test_a_tracked_jobs_progress_reads_as_celery_progress(redis_db, worker):
    jid = jobs.Steps.perform_async("view")
    worker()
    wait_for(lambda: AsyncResult(jid).state == "PROGRESS", timeout=60, message="PROGRESS")
    assert AsyncResult(jid).info == {"current": 30, "total": 100, "message": "step 1"}
    for step in (1, 2, 3):
        redis_db.set(f"go:view:{step}", 1)
    _reaches(jid, "complete")


# -- the testing modes -------------------------------------------------------------------


def test_inline_mode_keeps_the_record_in_this_process(redis_db):
    from wurk_django import testing

    with testing.testing_mode("inline"):
        for step in (1, 2, 3):
            redis_db.set(f"go:inline:{step}", 1)
        jid = jobs.Steps.perform_async("inline")
        done = status.get(jid)
        assert (done.state, done.progress, done.message, done.result) == ("complete", 100, "step 3",
                                                                           {"key": "inline", "steps": 3})
        with pytest.raises(RuntimeError):
            jobs.Once.set(jid="a" * 24).perform_async()
        failed = status.get("a" * 24)
        assert (failed.state, failed.error["class"], failed.attempts) == ("failed", "builtins.RuntimeError", 1)
    assert not redis_db.keys("status:*")  # nothing of it reached Redis


def test_fake_mode_reads_enqueued_until_drained(redis_db):
    from wurk_django import testing

    with testing.testing_mode("fake"):
        jid = jobs.Unjsonable.perform_async()
        assert status.get(jid).state == "enqueued"
        testing.drain(jobs.Unjsonable)
        assert status.get(jid).state == "complete" and status.get(jid).result_note.startswith("not kept")
    testing.clear_all()


@pytest.mark.slow
def test_a_django_task_reports_progress_and_get_result_reads_the_same_record(redis_db, tasks_backend, worker):
    result = jobs.tasks_reports.enqueue("django")
    worker()
    wait_for(lambda: (status.get(result.id).progress or 0) == 75, timeout=60, message="the report")
    seen = status.get(result.id)
    assert (seen.state, seen.message) == ("running", "three quarters")
    assert jobs.tasks_reports.get_result(result.id).status.name == "RUNNING"
    redis_db.set("go:django", 1)
    done = _reaches(result.id, "complete")
    assert done.result == "reported" == jobs.tasks_reports.get_result(result.id).return_value
