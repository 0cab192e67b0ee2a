"""PRO-340/341/342: Queue.delete_job(jid), delete_by_class, and scan with a callback."""

from __future__ import annotations

import json

import pytest

from tests.jobsapp.jobs import FailingJob, RecordJob
from wurk_django import payload
from wurk_django.api import DeadSet, Queue, RetrySet


def _raw(jid: str, klass: str = "HardJob", **extra) -> bytes:
    return payload.dumps({"class": klass, "args": [1], "jid": jid, "queue": "default", **extra})


def test_delete_job_by_jid_returns_the_record(redis_db):
    redis_db.lpush("queue:default", _raw("aaa"), _raw("bbb"), _raw("ccc"))
    record = Queue("default").delete_job("bbb")
    assert record is not None and record.jid == "bbb" and record.klass == "HardJob"
    assert [json.loads(r)["jid"] for r in redis_db.lrange("queue:default", 0, -1)] == ["ccc", "aaa"]
    assert Queue("default").delete_job("bbb") is None
    assert Queue("default").delete_job("zzz") is None


def test_delete_job_by_jid_removes_every_copy_and_spaced_json(redis_db):
    spaced = json.dumps({"class": "HardJob", "args": [], "jid": "dup"}).encode()  # Python's default layout
    redis_db.lpush("queue:default", _raw("dup"), spaced, _raw("keep"), _raw("dup"))
    assert Queue("default").delete_job("dup").jid == "dup"
    assert [json.loads(r)["jid"] for r in redis_db.lrange("queue:default", 0, -1)] == ["keep"]


def test_jid_is_matched_whole_not_as_a_substring(redis_db):
    redis_db.lpush("queue:default", _raw("abc123"))
    assert Queue("default").delete_job("abc") is None
    assert redis_db.llen("queue:default") == 1


def test_delete_job_keeps_accepting_raw_bytes_and_payload_text(redis_db):
    raw = _raw("x1")
    redis_db.lpush("queue:default", raw, _raw("x2"))
    assert Queue("default").delete_job(raw) is True
    assert Queue("default").delete_job(raw) is False
    assert Queue("default").delete_job(_raw("x2").decode()) is True
    assert redis_db.llen("queue:default") == 0


@pytest.mark.parametrize("bad", ["", "   "])
def test_empty_jid_is_refused(redis_db, bad):
    with pytest.raises(ValueError, match="non-empty jid"):
        Queue("default").delete_job(bad)


def test_delete_job_rejects_other_types(redis_db):
    with pytest.raises(TypeError):
        Queue("default").delete_job(123)  # type: ignore[call-overload]


def test_delete_by_class_with_name_and_class(redis_db):
    RecordJob.perform_async(1)
    RecordJob.perform_async(2)
    FailingJob.perform_async()
    wrapped = _raw("w1", klass="Sidekiq::ActiveJob::Wrapper", wrapped="tests.jobsapp.jobs.RecordJob")
    redis_db.lpush("queue:default", wrapped, _raw("h1"), _raw("h2"))
    queue = Queue("default")
    assert queue.delete_by_class(RecordJob) == 2
    assert queue.delete_by_class("HardJob") == 2
    assert queue.delete_by_class("Nothing") == 0
    left = [json.loads(r)["class"] for r in redis_db.lrange("queue:default", 0, -1)]
    # The wrapped job stays: only the top-level class matches (PRO-341).
    assert sorted(left) == ["Sidekiq::ActiveJob::Wrapper", "tests.jobsapp.jobs.FailingJob"]
    with pytest.raises(ValueError):
        queue.delete_by_class("")


def test_scan_as_generator_and_with_a_callback(redis_db):
    """PRO-342: `scan(pattern)` on sets, generator and callback."""
    for i, jid in enumerate(["r1", "r2", "r3"]):
        redis_db.zadd("retry", {_raw(jid, klass="Mailer" if i < 2 else "Other"): 100 + i})
    retries = RetrySet()
    assert sorted(e.jid for e in retries.scan("Mailer")) == ["r1", "r2"]
    seen = []

    def kill(entry):
        seen.append(entry.jid)
        entry.kill()

    assert retries.scan("Mailer", callback=kill) == 2
    assert sorted(seen) == ["r1", "r2"]
    assert [e.jid for e in RetrySet()] == ["r3"]
    assert sorted(e.jid for e in DeadSet()) == ["r1", "r2"]
    assert RetrySet().scan("*Oth*", callback=lambda e: None) == 1  # a glob is used as given
    with pytest.raises(ValueError):
        RetrySet().scan("")
