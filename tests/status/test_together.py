"""The features of issue 47 together, on real worker processes: a tracked job in a capped
queue (QUEUE_LIMITS), a tracked job past its deadline, a tracked debounced class, and a
job pushed over the HTTP API with ``track`` read back through ``GET /v1/jobs/<jid>``.
Each reads its status record from this (another) process, as a web view would."""

from __future__ import annotations

import json
import time

import pytest
from django.test import override_settings

from tests.http_api.conftest import Api
from tests.status import jobs
from tests.support import wait_for, wurk_settings
from wurk_django import status
from wurk_django.queue_limits import caps

EXTRA = {"IMPORT_ON_MISS": ["tests.status"], "QUEUE_LIMITS": {"capped": 1}, "POLL_INTERVAL_AVERAGE": 1}
READER_TOKEN = "together-token-0123456789"


@pytest.fixture
def worker(worker_factory):
    """One ``manage.py wurk`` process, two threads, on a queue capped at one and ``default``."""
    return lambda: worker_factory("-c", "2", "-q", "capped", "-q", "default",
                                  env={"WURK_TEST_EXTRA": json.dumps(EXTRA)})


def _state(jid: str) -> str | None:
    found = status.get(jid)
    return found.state if found is not None else None


def _reaches(jid: str, state: str, timeout: float = 90) -> status.Status:
    wait_for(lambda: _state(jid) == state, timeout=timeout, message=f"{jid} to read {state}")
    return status.get(jid)


def test_a_tracked_job_in_a_capped_queue_holds_its_slot_and_reports_progress(redis_db, worker):
    first = jobs.Steps.set(queue="capped").perform_async("cap1")
    second = jobs.Steps.set(queue="capped").perform_async("cap2")
    worker()
    wait_for(lambda: (status.get(first).progress or 0) >= 30, timeout=90, message="the first job's step 1")
    running = status.get(first)
    assert (running.state, running.progress, running.message) == ("running", 30, "step 1")
    # The cap is one: the second waits on its queue (a thread is free) and its record says so.
    assert caps.in_use(redis_db, ["capped"]) == {"capped": 1}
    assert _state(second) == "enqueued" and redis_db.llen("queue:capped") == 1
    for step in (1, 2, 3):
        redis_db.set(f"go:cap1:{step}", 1)
    done = _reaches(first, "complete")
    assert (done.progress, done.result) == (100, {"key": "cap1", "steps": 3})
    wait_for(lambda: _state(second) == "running", timeout=90, message="the second job took the freed slot")
    for step in (1, 2, 3):
        redis_db.set(f"go:cap2:{step}", 1)
    _reaches(second, "complete")
    wait_for(lambda: caps.in_use(redis_db, ["capped"]) == {"capped": 0}, timeout=30, message="the slot freed")


def test_a_tracked_job_past_its_deadline_ends_failed_with_the_reason(redis_db, worker):
    late = jobs.TrackedNote.set(queue="capped", deadline=time.time() - 1).perform_async("late")
    spin = jobs.TrackedSpin.set(deadline=time.time() + 6).perform_async("spin")
    assert _state(late) == "enqueued"
    worker()
    never = _reaches(late, "failed")
    assert never.reason == "deadline" and never.error["class"].endswith(".DeadlineExceeded")
    assert "not started by its deadline" in never.error["message"]
    stopped = _reaches(spin, "failed")
    assert stopped.error["class"].endswith("DeadlineExceeded") and "ran past its deadline" in stopped.error["message"]
    assert stopped.progress == 10 and stopped.message == "spinning"  # where it was when it was stopped
    assert redis_db.lrange("test:together", 0, -1) == []  # neither ran to its end
    assert {json.loads(raw)["jid"] for raw in redis_db.zrange("dead", 0, -1)} == {late, spin}
    # The late job was fetched from a capped queue with a slot: dropping it freed the slot.
    wait_for(lambda: caps.in_use(redis_db, ["capped"]) == {"capped": 0}, timeout=30, message="the slot freed")


def test_a_tracked_debounced_class_keeps_one_record_per_fired_job(redis_db, worker):
    burst = [jobs.TrackedDebounced.perform_async(version) for version in (1, 2, 3)]
    worker()
    fired = _reaches(burst[-1], "complete")
    assert (fired.result, fired.progress) == (3, 100)
    for old, new in zip(burst, burst[1:]):
        replaced = status.get(old)
        assert (replaced.state, replaced.message) == ("revoked", f"replaced by a later push {new}")
    second = [jobs.TrackedDebounced.perform_async(version) for version in (4, 5)]
    assert _reaches(second[-1], "complete").result == 5
    assert _state(second[0]) == "revoked"
    assert redis_db.lrange("test:together", 0, -1) == [b"debounced:3", b"debounced:5"]
    states = sorted(status.get(jid).state for jid in burst + second)
    assert states == ["complete", "complete", "revoked", "revoked", "revoked"]  # one record per push


def test_a_job_pushed_over_http_with_track_shows_its_progress_there(redis_db, worker):
    tokens = {"together": {"TOKEN": READER_TOKEN, "SCOPES": ["enqueue", "read"]}}
    with override_settings(ROOT_URLCONF="tests.http_api.urls"), \
            wurk_settings(HTTP_API_TOKENS=tokens, HTTP_API_JOB_CLASSES=["tests.status.jobs.Held"]):
        from wurk_django.conf import reset_config

        reset_config()
        try:
            api = Api(READER_TOKEN)
            answer = api.post("/jobs", {"class": "tests.status.jobs.Held", "args": ["http"], "track": True})
            assert answer.status_code == 201, answer.content
            jid = answer.json()["jid"]
            assert api.get(f"/jobs/{jid}").json()["result"]["state"] == "enqueued"
            untracked = api.post("/jobs", {"class": "tests.status.jobs.Held", "args": ["plain"]}).json()["jid"]
            worker()
            wait_for(lambda: (api.get(f"/jobs/{jid}").json()["result"] or {}).get("progress") == 40, timeout=90,
                     message="the progress over HTTP")
            seen = api.get(f"/jobs/{jid}").json()
            assert seen["state"] == "running" and seen["result"]["message"] == "halfway"
            assert seen["result"]["state"] == "running"
            # No track, no record: found where it is cheap to look, in the running work once listed.
            plain = wait_for(lambda: (lambda r: r.status_code == 200 and r.json())(api.get(f"/jobs/{untracked}")),
                             timeout=30, message="the untracked job in its worker's work")
            assert (plain["state"], plain["result"]) == ("running", None)
            redis_db.set("go:http", 1)
            redis_db.set("go:plain", 1)
            wait_for(lambda: (api.get(f"/jobs/{jid}").json()["result"] or {}).get("state") == "complete",
                     timeout=90, message="complete over HTTP")
            done = api.get(f"/jobs/{jid}").json()
            assert (done["state"], done["result"]["progress"], done["result"]["result"]) == ("unknown", 100, "http")
        finally:
            reset_config()
