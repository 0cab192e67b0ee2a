"""Issue 12, items 1, 2, 6, 7: a payload can neither wedge a processor, loop hot, nor vanish."""

from __future__ import annotations

import json
import re

from tests.hostile.conftest import dead_entries, retry_entries
from tests.jobsapp.jobs import CountedFailJob, RecordJob
from wurk_django import payload


def _good(n: int) -> list[str]:
    return [RecordJob.perform_async(i) for i in range(n)]


def _raw(**fields) -> bytes:
    job = {"class": "tests.jobsapp.jobs.RecordJob", "args": ["bad"], "jid": "a" * 24, "queue": "default",
           "retry": True, "created_at": 1, "enqueued_at": 1}
    job.update(fields)
    return json.dumps({k: v for k, v in job.items() if v is not ...}).encode()


def _ran(redis_db) -> list[bytes]:
    return redis_db.lrange("test:ran", 0, -1)


def test_integer_jid_is_dead_set_and_the_jobs_behind_it_run(redis_db, burst):
    # Item 1: the parked ACK of an int jid raised on every fetch of that thread.
    redis_db.lpush("queue:default", _raw(jid=1001))
    _good(200)
    emptied, log = burst()
    assert emptied
    assert len(_ran(redis_db)) == 200
    [entry] = dead_entries(redis_db)
    assert entry["invalid_jid"] == 1001 and isinstance(entry["jid"], str)
    assert "'jid' must be a non-empty string" in entry["error_message"]
    assert not [k for k in redis_db.scan_iter(match="queue:default|*") if redis_db.llen(k)]
    assert not re.search(r"thread \S+ died", log)


def test_non_integer_retry_count_never_runs_in_a_loop(redis_db, burst):
    # Item 2: int("abc") while booking sent the job straight back to the queue, thousands of times.
    redis_db.lpush("queue:default", _raw(**{"class": "tests.jobsapp.jobs.CountedFailJob", "retry_count": "abc"}))
    _good(5)
    emptied, log = burst(timeout=8)
    assert emptied
    assert int(redis_db.get("test:failruns") or 0) <= 1
    [entry] = dead_entries(redis_db)
    assert "retry_count" in entry["error_message"]
    assert len(_ran(redis_db)) == 5
    assert len(log.splitlines()) < 100


def test_a_failure_that_cannot_be_booked_ends_in_the_dead_set(redis_db, burst):
    # Item 2: booking itself raises (here a broken BACKTRACE_CLEANER): the job ran once and is dead-set
    # with both errors, never re-run at once.
    jid = CountedFailJob.set(backtrace=True).perform_async()
    _good(5)
    emptied, log = burst(timeout=8, BACKTRACE_CLEANER="tests.jobsapp.jobs.broken_backtrace_cleaner")
    assert emptied
    assert int(redis_db.get("test:failruns")) == 1
    [entry] = dead_entries(redis_db)
    assert entry["jid"] == jid
    assert "counted failure" in entry["error_message"] and "the cleaner broke" in entry["error_message"]
    assert not retry_entries(redis_db)
    assert len(_ran(redis_db)) == 5


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_deep_payloads_are_refused_at_parse_time(redis_db, burst):
    # Items 2 and 6: 400 levels parse but cannot be written back; without a class they killed the thread.
    deep = _nested(400)
    redis_db.lpush("queue:default", _raw(args=deep), _raw(**{"class": ..., "args": deep}),
                   _raw(**{"class": "Nowhere::Job", "args": deep}))
    _good(20)
    emptied, log = burst(timeout=8)
    assert emptied
    dead = dead_entries(redis_db)
    assert len(dead) == 3
    assert all("nested deeper than 100 levels" in d["error_message"] for d in dead)
    assert all(d["class"] == "<unparseable>" and isinstance(d["args"][0], str) for d in dead)
    assert len(_ran(redis_db)) == 20
    assert not re.search(r"thread \S+ died", log)


def test_depth_limit_is_ruby_default_max_nesting():
    assert payload.parse_job(payload.dumps({"class": "X", "args": _nested(99)}))  # 1 + 99 levels
    try:
        payload.parse_job(payload.dumps({"class": "X", "args": _nested(100)}))
    except ValueError as exc:
        assert "nested deeper" in str(exc)
    else:
        raise AssertionError("101 levels were accepted")


def test_unknown_class_without_a_retry_key_is_dead_set(redis_db, burst):
    # Item 7: acknowledged and kept nowhere before.
    for i in range(50):
        redis_db.lpush("queue:default", _raw(**{"class": "Nowhere::Job", "retry": ..., "jid": f"{i:024x}"}))
    emptied, _log = burst()
    assert emptied
    dead = dead_entries(redis_db)
    assert len(dead) == 50
    assert {d["error_class"] for d in dead} == {"wurk_django.errors.UnknownJobClass"}
    assert all("Nowhere::Job" in d["error_message"] for d in dead)
