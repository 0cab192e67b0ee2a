"""Deadlines (issue 47 item 5): checked at the push; in a real worker a job past its deadline
never runs and is dead with the reason (or discarded), a running one is stopped at it as at a
hard time limit, a retry past it dies; unique locks, batches and result records follow."""

from __future__ import annotations

import datetime as dt
import json
import time

import pytest

from tests.batch.conftest import callbacks, run_jobs
from tests.jobsapp.batch_jobs import Callbacks, Mark
from tests.jobsapp.deadline_jobs import Fails, Loop, Nap, Note, UniqueNote
from tests.support import wait_for, wurk_settings
from wurk_django import payload
from wurk_django.batch import Batch, Status

MODULES = {"WURK_TEST_EXTRA": json.dumps({"IMPORT_ON_MISS": ["tests.results", "tests.jobsapp"]})}


def _queued(redis_db, queue: str = "default") -> list[dict]:
    return [json.loads(raw) for raw in redis_db.lrange(f"queue:{queue}", 0, -1)]


def _set(redis_db, name: str) -> dict[str, dict]:
    return {job["jid"]: job for job in (json.loads(raw) for raw in redis_db.zrange(name, 0, -1))}


def _recorded(redis_db) -> list[str]:
    return [item.decode() for item in redis_db.lrange("test:deadline", 0, -1)]


# -- at the push ---------------------------------------------------------------------


def test_a_deadline_travels_as_epoch_seconds_and_only_when_given(redis_db):
    aware = dt.datetime(2099, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    Note.set(deadline=aware).perform_async("a")
    Note.set(deadline=4_102_444_800.5, deadline_action="discard").perform_async("b")
    Note.set(deadline=aware, deadline_action="dead").perform_async("c")
    Note.perform_async("d")
    by_tag = {job["args"][0]: job for job in _queued(redis_db)}
    assert by_tag["a"]["deadline"] == aware.timestamp() and "deadline_action" not in by_tag["a"]
    assert by_tag["b"]["deadline"] == 4_102_444_800.5 and by_tag["b"]["deadline_action"] == "discard"
    assert "deadline_action" not in by_tag["c"]  # the dead set is the default: no key
    assert "deadline" not in by_tag["d"] and "deadline_action" not in by_tag["d"]


@pytest.mark.parametrize("bad, match", [
    (dt.datetime(2099, 1, 1, 12, 0), r"naive datetime\.datetime\(2099, 1, 1, 12, 0\)"),
    ("2099-01-01", "'2099-01-01'"),
    (True, "True"),
    (float("nan"), "nan"),
    (3600, "absolute time .* not 3600"),
])
def test_a_bad_deadline_is_refused_at_the_call_naming_it(redis_db, bad, match):
    with pytest.raises(ValueError, match=match):
        Note.set(deadline=bad).perform_async("x")
    assert redis_db.llen("queue:default") == 0


def test_a_bad_action_and_a_run_time_after_the_deadline_are_refused(redis_db):
    soon = time.time() + 60
    with pytest.raises(ValueError, match="deadline_action.*'later'"):
        Note.set(deadline=soon, deadline_action="later").perform_async("x")
    with pytest.raises(ValueError, match="after its deadline"):
        Note.set(deadline=soon).perform_in(120, "x")
    with pytest.raises(ValueError, match="after its deadline"):
        Note.set(deadline=soon).perform_at(dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5), "x")
    with pytest.raises(ValueError, match="after its deadline"):
        Note.set(deadline=soon).perform_bulk([["x"], ["y"]], at=soon + 1)
    assert redis_db.llen("queue:default") == 0 and redis_db.zcard("schedule") == 0
    assert Note.set(deadline=soon).perform_in(30, "fine")  # before the deadline: scheduled
    [scheduled] = [json.loads(raw) for raw in redis_db.zrange("schedule", 0, -1)]
    assert scheduled["deadline"] == soon


# -- with the real server chain, in process --------------------------------------------


def test_a_job_past_its_deadline_counts_as_a_death_for_its_batch(redis_db):
    batch = Batch()
    for event in ("success", "complete", "death"):
        batch.on(event, Callbacks, {"tag": "d"})
    with batch.jobs():
        late = Mark.set(deadline=time.time() - 1).perform_async("late")
        Mark.perform_async("on-time")
    run_jobs(redis_db)
    assert [m.decode() for m in redis_db.lrange("test:marks", 0, -1)] == [f"{batch.bid}:on-time"]
    assert late in _set(redis_db, "dead")
    assert sorted(callbacks(redis_db)) == [f"complete:{batch.bid}:d", f"death:{batch.bid}:d"]
    assert Status(batch.bid).data()["dead_jids"] == [late]


def test_a_unique_job_dropped_at_its_deadline_releases_its_lock(redis_db):
    with wurk_settings(UNIQUE_JOBS=True):
        _unique_lock_released(redis_db)


def _unique_lock_released(redis_db):
    first = UniqueNote.set(deadline=time.time() - 1).perform_async("u1")
    assert first and UniqueNote.perform_async("u1") is None  # held by the queued one
    run_jobs(redis_db)
    assert first in _set(redis_db, "dead") and _recorded(redis_db) == []
    assert UniqueNote.perform_async("u1")  # the lock went with it


# -- in a real worker ---------------------------------------------------------------------


@pytest.mark.slow
def test_deadlines_in_a_worker(redis_db, worker_factory):
    from tests.results import tasks
    from wurk_django.celery import states

    past = time.time() - 5
    late = Note.set(deadline=past).perform_async("late")
    discarded = Note.set(deadline=past, deadline_action="discard").perform_async("late-discard")
    result = tasks.add.delay(1, 2)
    # The task's payload as pushed, given a deadline as another client would write it.
    [raw] = [raw for raw in redis_db.lrange("queue:default", 0, -1) if result.id.encode() in raw]
    redis_db.lrem("queue:default", 1, raw)
    redis_db.lpush("queue:default", payload.dumps({**payload.loads(raw), "deadline": past}))

    worker = worker_factory("-c", "4", env=MODULES)
    wait_for(lambda: late in _set(redis_db, "dead") and result.state == states.FAILURE, timeout=90,
             message="the late job and task dead")
    dead = _set(redis_db, "dead")[late]
    assert dead["error_class"] == "wurk_django.errors.DeadlineExceeded"
    assert "not started by its deadline" in dead["error_message"]
    wait_for(lambda: "was not started by its deadline" in worker.output()
             and "discarded" in worker.output(), timeout=30, message="the discard logged")
    assert discarded not in _set(redis_db, "dead") and _recorded(redis_db) == []  # neither ran

    # Started in time, still running at the deadline; or failing with a retry due after it.
    soon = time.time() + 8
    nap = Nap.set(deadline=soon).perform_async("nap")
    loop = Loop.set(deadline=soon).perform_async("loop")
    fails = Fails.set(deadline=soon).perform_async("fails")
    fails_discarded = Fails.set(deadline=soon, deadline_action="discard").perform_async("fails-d")
    control = Fails.set(deadline=time.time() + 3600).perform_async("control")
    wait_for(lambda: {nap, loop, fails} <= set(_set(redis_db, "dead")) and control in _set(redis_db, "retry"),
             timeout=90, message="the running jobs stopped at their deadline, the failure dead")
    dead = _set(redis_db, "dead")
    for jid in (nap, loop):
        assert dead[jid]["error_class"] == "wurk_django.errors.DeadlineExceeded"
        assert "ran past its deadline" in dead[jid]["error_message"]
    assert dead[fails]["error_class"] == "RuntimeError"
    assert "fails broke (not retried: its retry at" in dead[fails]["error_message"]
    assert "would be past its deadline" in dead[fails]["error_message"]
    wait_for(lambda: "loop:unwound:HardStop" in _recorded(redis_db), timeout=30, message="the loop unwound")
    recorded = _recorded(redis_db)
    assert {"nap:start", "loop:start", "fails-d:failed", "control:failed"} <= set(recorded)
    assert "nap:woke" not in recorded and "loop:not-stopped" not in recorded
    assert fails_discarded not in _set(redis_db, "dead") and fails_discarded not in _set(redis_db, "retry")
    assert set(_set(redis_db, "dead")) == {late, result.id, nap, loop, fails}
    assert worker.output().count("reached its deadline: its thread is abandoned and replaced") == 2
    # The abandoned threads were replaced: the worker still runs jobs.
    Note.perform_async("after")
    wait_for(lambda: "after:ran" in _recorded(redis_db), timeout=60, message="a job after the abandonments")
    assert worker.alive()
