"""Debounce and throttle as push policies (issue 47 item 3): one policy per class, checked at
definition; a burst of debounced pushes is one ordinary schedule entry with the last payload,
capped by its max wait; one throttled push per slot; racing processes leave one job each; a
real worker runs the debounced burst once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.jobsapp.policy_jobs import PerUser, Ping, Reindex, SlowBurst, Tick, TrackedReindex
from tests.support import ROOT, stop_process, wait_for
from wurk_django import Job, status
from wurk_django.client import Client

EXTRA = {"IMPORT_ON_MISS": ["tests"], "POLL_INTERVAL_AVERAGE": 1}


def _schedule(redis_db) -> list[tuple[dict, float]]:
    return [(json.loads(raw), score) for raw, score in redis_db.zrange("schedule", 0, -1, withscores=True)]


def _away_from_a_slot_boundary(period: float = 60, margin: float = 5) -> None:
    """Wait until the current slot has ``margin`` seconds left: pushes meant for one slot stay in it."""
    while time.time() % period > period - margin:
        time.sleep(0.2)


def test_a_class_declares_one_push_policy_at_most():
    with pytest.raises(TypeError, match="declares unique_for and debounce_for: a job class has one push policy"):
        type("Both", (Job,), {"__module__": __name__, "unique_for": 60, "debounce_for": 5})
    with pytest.raises(TypeError, match="declares debounce_for and throttle_for"):
        type("Both2", (Job,), {"__module__": __name__, "debounce_for": 5, "job_options": {"throttle_for": 5}})
    with pytest.raises(TypeError, match="'throttle_for' must be seconds > 0"):
        type("Bad", (Job,), {"__module__": __name__, "throttle_for": 0})
    with pytest.raises(TypeError, match="'debounce_max_wait' without 'debounce_for'"):
        type("Bad2", (Job,), {"__module__": __name__, "debounce_max_wait": 5})
    with pytest.raises(ValueError, match="one push policy at most"):
        Reindex.set(throttle_for=5).perform_async(1)


def test_a_burst_of_debounced_pushes_is_one_schedule_entry_with_the_last_payload(redis_db):
    before = time.time()
    jids = [Reindex.perform_async(version) for version in (1, 2, 3)]
    assert all(jids) and len(set(jids)) == 3  # each push is accepted; each takes the last one's place
    [(job, score)] = _schedule(redis_db)
    assert job["args"] == [3] and job["jid"] == jids[-1] and job["debounce_for"] == 1.0
    assert before + 1 <= score <= time.time() + 1
    assert redis_db.llen("queue:default") == 0
    with pytest.raises(ValueError, match="perform_in/perform_at cannot choose a time"):
        Reindex.perform_in(10, 4)


def test_a_replaced_tracked_push_reads_revoked_in_the_same_step(redis_db):
    """Issue 47 item 1 x 2: the record of a push a later one replaced says so at once."""
    jids = [TrackedReindex.perform_async(version) for version in (1, 2, 3)]
    [(job, _score)] = _schedule(redis_db)
    assert job["jid"] == jids[2]
    for old, new in zip(jids, jids[1:]):
        record = status.get(old)
        assert record.state == "revoked" and record.finished
        assert record.message == f"replaced by a later push {new}"
        assert record.finished_at is not None
        assert 0 < redis_db.ttl(f"status:{old}") <= record.ttl  # kept for its TTL, then gone
    assert status.get(jids[2]).state == "scheduled"
    # An untracked class's burst writes no record (its replaced payload has no "track").
    for version in (1, 2):
        Reindex.perform_async(version)
    assert sorted(redis_db.keys("status:*")) == sorted(f"status:{jid}".encode() for jid in jids)


def test_a_busy_burst_runs_by_its_max_wait(redis_db):
    SlowBurst.perform_async(1)
    [key] = redis_db.keys("debounce:*")
    began = time.time() - 35  # as if the burst had been pushed to for 35 s without a pause
    redis_db.hset(key, "first", repr(began))
    SlowBurst.perform_async(2)
    [(job, score)] = _schedule(redis_db)
    assert job["args"] == [2]
    assert score == pytest.approx(began + 40)  # capped: 5 s from now, not 30


def test_policy_key_narrows_a_burst(redis_db):
    for version in (1, 2):
        PerUser.perform_async(7, version)
        PerUser.perform_async(8, version)
    assert sorted(job["args"] for job, _ in _schedule(redis_db)) == [[7, 2], [8, 2]]


def test_one_throttled_push_per_slot_the_rest_return_none(redis_db):
    _away_from_a_slot_boundary()
    first = Ping.perform_async(1)
    assert first and Ping.perform_async(2) is None and Ping.perform_async(3) is None
    assert [json.loads(raw)["args"] for raw in redis_db.lrange("queue:default", 0, -1)] == [[1]]
    assert Tick.perform_async(1)
    slot = int(time.time())
    while int(time.time()) == slot:
        time.sleep(0.05)
    assert Tick.perform_async(2)  # the next one-second slot


def test_a_job_pushed_again_by_the_engine_is_written_as_it_is(redis_db):
    # An iterable job's pause pushes the fetched payload again (it carries enqueued_at).
    again = {"class": Reindex.job_name, "args": [9], "queue": "default", "jid": "a" * 24, "debounce_for": 1.0,
             "created_at": 1, "enqueued_at": 2}
    Client().push(again)
    assert redis_db.llen("queue:default") == 1 and redis_db.zcard("schedule") == 0


@pytest.mark.slow
def test_racing_processes_leave_one_debounced_job_and_one_throttled_push(redis_db, worker_factory):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "WURK_TEST_EXTRA": json.dumps(EXTRA)}
    racers = [subprocess.Popen([sys.executable, "-m", "tests.policies.racer", "20"], cwd=str(ROOT), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        wait_for(lambda: redis_db.llen("test:race:ready") == 2, timeout=60, message="racers ready")
        _away_from_a_slot_boundary(margin=20)
        redis_db.set("test:race:go", "1")
        debounced, throttled = [], []
        for proc in racers:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            results = json.loads(out)
            debounced += results["debounced"]
            throttled += results["throttled"]
    finally:
        for proc in racers:
            stop_process(proc, signal.SIGTERM, 5)
    assert len(debounced) == 40 and all(debounced)
    [(job, _score)] = _schedule(redis_db)  # forty pushes, one pending job: the last one's
    assert job["jid"] in debounced
    assert len([jid for jid in throttled if jid]) == 1 and redis_db.llen("queue:default") == 1

    # A real worker: a burst runs once, with the last arguments, after its quiet second.
    redis_db.delete("schedule", "queue:default")
    for version in range(1, 6):
        Reindex.perform_async(version)
    worker_factory("-c", "2", env={"WURK_TEST_EXTRA": json.dumps(EXTRA)})
    wait_for(lambda: redis_db.lrange("test:policies", 0, -1) == [b"reindex:5"], timeout=60,
             message="the burst ran once, with the last arguments")
    Reindex.perform_async(6)  # after the burst ran: a new burst
    wait_for(lambda: redis_db.lrange("test:policies", 0, -1) == [b"reindex:5", b"reindex:6"], timeout=60,
             message="the next burst ran")
