"""Pushing over HTTP through the one push door, and reading and deleting jobs (issue 47 item 1)."""

from __future__ import annotations

import json
import time

import pytest

from tests.http_api.access import assert_problem
from tests.jobsapp.jobs import RecordJob
from tests.support import queued, wurk_settings
from wurk_django import payload
from wurk_django.results import store

RECORD = "tests.jobsapp.jobs.RecordJob"
#: What differs between two pushes of one job: its id and its timestamps.
OWN = ("jid", "created_at", "enqueued_at")


def comparable(raw: bytes) -> list:
    """The stored JSON as (key, value) pairs in stored order, with the per-push fields blanked."""
    pairs = json.loads(raw, object_pairs_hook=list)
    return [(key, "<own>" if key in OWN else value) for key, value in pairs]


def test_a_job_pushed_over_http_is_the_job_perform_async_pushes(http_api, redis_db):
    response = http_api().post("/jobs", {"class": RECORD, "args": ["same", 2, {"k": [1.5, None]}]})
    assert response.status_code == 201 and response.json()["enqueued"] is True
    RecordJob.perform_async("same", 2, {"k": [1.5, None]})
    over_http, direct = redis_db.lrange("queue:default", 0, -1)[::-1]
    assert comparable(over_http) == comparable(direct)
    assert json.loads(over_http)["jid"] == response.json()["jid"]


def test_with_options_it_is_the_job_set_perform_async_pushes(http_api, redis_db):
    options = {"queue": "low", "retry": 3, "tags": ["http", "api"], "backtrace": True}
    assert http_api().post("/jobs", {"class": RECORD, "args": ["o"], **options}).status_code == 201
    RecordJob.set(**options).perform_async("o")
    over_http, direct = redis_db.lrange("queue:low", 0, -1)[::-1]
    assert comparable(over_http) == comparable(direct)


def test_keyword_arguments_are_stored_as_perform_async_stores_them(http_api, redis_db):
    assert http_api().post("/jobs", {"class": RECORD, "args": [], "kwargs": {"value": "kw"}}).status_code == 201
    RecordJob.perform_async(value="kw")
    over_http, direct = redis_db.lrange("queue:default", 0, -1)[::-1]
    assert comparable(over_http) == comparable(direct)
    assert json.loads(over_http)["kwargs"] == {"value": "kw"}


def test_a_scheduled_push_is_the_job_perform_in_pushes(http_api, redis_db):
    before = time.time()
    assert http_api().post("/jobs", {"class": RECORD, "args": ["later"], "in": 600}).status_code == 201
    RecordJob.perform_in(600, "later")
    (over_http, score), (direct, _) = redis_db.zrange("schedule", 0, -1, withscores=True)
    assert comparable(over_http) == comparable(direct)
    assert before + 600 <= score <= time.time() + 600


def test_at_takes_epoch_seconds_or_an_rfc3339_time_and_a_past_time_runs_now(http_api, redis_db):
    api = http_api()
    assert api.post("/jobs", {"class": RECORD, "args": [1], "at": time.time() + 3600}).status_code == 201
    assert api.post("/jobs", {"class": RECORD, "args": [2], "at": "2999-01-01T00:00:00Z"}).status_code == 201
    assert api.post("/jobs", {"class": RECORD, "args": [3], "at": "2001-01-01T00:00:00+02:00"}).status_code == 201
    assert redis_db.zcard("schedule") == 2
    assert [job["args"] for job in queued(redis_db)] == [[3]]
    assert_problem(api.post("/jobs", {"class": RECORD, "args": [4], "at": "2999-01-01T00:00:00"}),
                   422, "invalid-job")  # no offset: ambiguous
    assert_problem(api.post("/jobs", {"class": RECORD, "args": [5], "at": 1, "in": 1}), 422, "invalid-job")


def test_a_ruby_class_is_pushed_only_when_listed_by_name(http_api, redis_db):
    api = http_api()
    assert api.post("/jobs", {"class": "RubyWorker", "args": ["rb"], "queue": "ruby"}).status_code == 201
    assert queued(redis_db, "ruby")[0]["class"] == "RubyWorker"
    # A prefix admits Python job classes only: a name no Python class has is not admitted by it.
    body = assert_problem(api.post("/jobs", {"class": "tests.jobsapp.push_jobs.Imaginary", "args": []}),
                          403, "class-not-allowed")
    assert body["class"] == "tests.jobsapp.push_jobs.Imaginary"
    assert api.post("/jobs", {"class": "tests.jobsapp.push_jobs.Plain", "args": [1]}).status_code == 201
    assert_problem(api.post("/jobs", {"class": "tests.jobsapp.jobs.FailingJob", "args": []}),
                   403, "class-not-allowed")
    assert [job["class"] for job in queued(redis_db)] == ["tests.jobsapp.push_jobs.Plain"]


def test_a_python_name_of_a_class_pushes_the_class_under_that_name(http_api, redis_db):
    # "HardJob" is tests.jobsapp.jobs.RubyNamedJob's name: its options apply as to perform_async.
    assert http_api().post("/jobs", {"class": "HardJob", "args": [7]}).status_code == 201
    assert queued(redis_db)[0]["class"] == "HardJob"


def test_nothing_is_enqueueable_by_default(http_api, redis_db):
    with wurk_settings(HTTP_API_JOB_CLASSES=[]):
        assert_problem(http_api().post("/jobs", {"class": RECORD, "args": []}), 403, "class-not-allowed")
    assert redis_db.llen("queue:default") == 0


@pytest.mark.parametrize(("body", "status", "slug"), [
    (b"{not json", 400, "invalid-body"),
    (b"[1, 2]", 400, "invalid-body"),
    ({"args": []}, 422, "invalid-job"),
    ({"class": RECORD, "args": "x"}, 422, "invalid-job"),
    ({"class": RECORD, "args": [], "kwargs": [1]}, 422, "invalid-job"),
    ({"class": RECORD, "args": [], "colour": "red"}, 422, "invalid-job"),
    ({"class": RECORD, "args": [], "queue": "bell\u0007"}, 422, "invalid-job"),
    ({"class": RECORD, "args": [], "retry": "often"}, 422, "invalid-job"),
    ({"class": RECORD, "args": [], "in": "soon"}, 422, "invalid-job"),
])
def test_a_body_that_cannot_be_a_job_is_a_problem_naming_it(http_api, redis_db, body, status, slug):
    assert_problem(http_api().post("/jobs", body), status, slug)
    assert redis_db.llen("queue:default") == 0


def test_the_door_error_is_the_detail(http_api):
    body = assert_problem(http_api().post("/jobs", {"class": RECORD, "args": [], "queue": "tab\there"}), 422, "invalid-job")
    assert "tab" in body["detail"] and "queue" in body["detail"]


def test_a_body_that_is_not_json_by_its_type_is_415(http_api):
    response = http_api().client.post("/wurk/v1/jobs", data="class=x", content_type="application/x-www-form-urlencoded",
                                      headers=http_api().headers())
    assert_problem(response, 415, "unsupported-media-type")


def test_body_and_argument_caps(http_api, redis_db):
    api = http_api()
    with wurk_settings(HTTP_API_MAX_BODY_BYTES=200, HTTP_API_MAX_ARGS_BYTES=50):
        body = assert_problem(api.post("/jobs", {"class": RECORD, "args": ["x" * 300]}), 413, "body-too-large")
        assert body["limit"] == 200
        body = assert_problem(api.post("/jobs", {"class": RECORD, "args": ["x" * 60]}), 422, "arguments-too-large")
        assert body["limit"] == 50 and body["size"] > 50
        assert api.post("/jobs", {"class": RECORD, "args": ["x" * 30]}).status_code == 201
    assert redis_db.llen("queue:default") == 1


def test_bulk_pushes_one_job_per_argument_list_like_push_bulk(http_api, redis_db):
    response = http_api().post("/jobs/bulk", {"class": RECORD, "args": [["a"], ["b"], ["c"]], "queue": "bulk"})
    assert response.status_code == 201
    jids = response.json()["jids"]
    assert response.json()["enqueued"] == 3 and len(set(jids)) == 3
    stored = queued(redis_db, "bulk")[::-1]
    assert [job["jid"] for job in stored] == jids and [job["args"] for job in stored] == [["a"], ["b"], ["c"]]
    RecordJob.set(queue="bulk").perform_bulk([["a"]])
    assert comparable(redis_db.lindex("queue:bulk", 0)) == comparable(redis_db.lindex("queue:bulk", -1))


def test_bulk_is_checked_whole_before_anything_is_pushed(http_api, redis_db):
    api = http_api()
    with wurk_settings(HTTP_API_MAX_BULK=2):
        assert_problem(api.post("/jobs/bulk", {"class": RECORD, "args": [[1], [2], [3]]}), 422, "too-many-jobs")
    assert_problem(api.post("/jobs/bulk", {"class": RECORD, "args": [[1], 2]}), 422, "invalid-job")
    assert_problem(api.post("/jobs/bulk", {"class": RECORD, "args": []}), 422, "invalid-job")
    assert_problem(api.post("/jobs/bulk", {"class": "Nope", "args": [[1]]}), 403, "class-not-allowed")
    with wurk_settings(HTTP_API_MAX_ARGS_BYTES=10):
        assert_problem(api.post("/jobs/bulk", {"class": RECORD, "args": [[1], ["x" * 20]]}),
                       422, "arguments-too-large")
    assert redis_db.llen("queue:default") == 0
    assert http_api().post("/jobs/bulk", {"class": RECORD, "args": [[1], [2]], "in": 60}).status_code == 201
    assert redis_db.zcard("schedule") == 2


def _raw_job(jid: str, **fields) -> bytes:
    return payload.dumps({"class": RECORD, "args": [1], "jid": jid, "queue": "default", "created_at": time.time(),
                          **fields})


def _tracked(redis_db, jid: str, state: str = "enqueued") -> None:
    """A status record for ``jid``, as a tracked class keeps one."""
    store.write(redis_db, jid, {"state": state, "class": RECORD}, 60)


def test_the_status_says_where_a_tracked_job_is(http_api, redis_db):
    api = http_api()
    queued_jid = api.post("/jobs", {"class": RECORD, "args": ["q"], "queue": "mail", "track": True}).json()["jid"]
    scheduled_jid = api.post("/jobs", {"class": RECORD, "args": ["s"], "in": 600, "track": True}).json()["jid"]
    redis_db.zadd("retry", {_raw_job("r" * 24, retry_count=2, error_class="KeyError",
                                     error_message="gone"): time.time() + 60})
    redis_db.zadd("dead", {_raw_job("d" * 24, error_class="RuntimeError", error_message="boom"): time.time()})
    _tracked(redis_db, "r" * 24, "retrying")
    _tracked(redis_db, "d" * 24, "failed")

    status = api.get(f"/jobs/{queued_jid}").json()
    assert (status["state"], status["queue"], status["class"]) == ("queued", "mail", RECORD)
    assert status["result"]["state"] == "enqueued"
    status = api.get(f"/jobs/{scheduled_jid}").json()
    assert status["state"] == "scheduled" and status["at"] > time.time() + 500
    status = api.get(f"/jobs/{'r' * 24}").json()
    assert (status["state"], status["retry_count"], status["error_class"]) == ("retry", 2, "KeyError")
    status = api.get(f"/jobs/{'d' * 24}").json()
    assert (status["state"], status["error_message"]) == ("dead", "boom")
    assert "args" not in status  # arguments may be private: a status never shows them


def test_a_job_without_a_record_is_looked_for_only_where_it_is_cheap(http_api, redis_db, monkeypatch):
    """Review of stop 51: a job that keeps no status record is looked for in the running work
    and in the queue the request names, never in the sets, every queue or the keyspace;
    elsewhere it is a 404 job-unknown problem."""
    from redis import Redis

    from wurk_django.api.sorted import JobSet

    searched: list[str] = []
    scan_iter, zscan_iter = Redis.scan_iter, Redis.zscan_iter
    monkeypatch.setattr(Redis, "scan_iter", lambda self, *a, **kw: searched.append("SCAN") or scan_iter(self, *a, **kw))
    monkeypatch.setattr(Redis, "zscan_iter",
                        lambda self, *a, **kw: searched.append("ZSCAN") or zscan_iter(self, *a, **kw))
    monkeypatch.setattr(JobSet, "find_job", lambda self, jid: searched.append(self.name))
    api = http_api()
    queued_jid = api.post("/jobs", {"class": RECORD, "args": ["q"], "queue": "mail"}).json()["jid"]
    status = api.get(f"/jobs/{queued_jid}?queue=mail").json()
    assert (status["state"], status["queue"], status["class"], status["result"]) == ("queued", "mail", RECORD, None)
    detail = assert_problem(api.get(f"/jobs/{queued_jid}"), 404, "job-unknown")["detail"]
    assert "unknown or untracked" in detail
    assert_problem(api.get(f"/jobs/{queued_jid}?queue=other"), 404, "job-unknown")
    scheduled_jid = api.post("/jobs", {"class": RECORD, "args": ["s"], "in": 600}).json()["jid"]
    redis_db.zadd("dead", {_raw_job("d" * 24): time.time()})
    redis_db.lpush("queue:mail|box|123|n0nce|0", _raw_job("f" * 24, queue="mail"))
    for jid in (scheduled_jid, "d" * 24, "f" * 24, "0123456789abcdef01234567"):
        assert_problem(api.get(f"/jobs/{jid}"), 404, "job-unknown")
    assert searched == []


def test_a_job_in_a_worker_s_private_list_is_running(http_api, redis_db):
    # Fetched, not yet in the worker's work (written at its next heartbeat); it keeps a record.
    redis_db.lpush("queue:mail|box|123|n0nce|0", _raw_job("f" * 24, queue="mail"))
    _tracked(redis_db, "f" * 24)
    status = http_api().get(f"/jobs/{'f' * 24}").json()
    assert (status["state"], status["queue"], status["class"]) == ("running", "mail", RECORD)
    assert assert_problem(http_api().delete(f"/jobs/{'f' * 24}"), 409, "job-not-deletable")["state"] == "running"


def test_the_status_carries_the_result_record(http_api, redis_db):
    store.write(redis_db, "c" * 24, {"state": "complete", "class": RECORD, "return_value": {"n": 3}}, 60)
    status = http_api().get(f"/jobs/{'c' * 24}").json()
    assert status["state"] == "unknown"  # gone from every list: it ran
    assert status["result"]["state"] == "complete" and status["result"]["result"] == {"n": 3}


def test_a_final_record_spares_the_keyspace_scan(http_api, redis_db, monkeypatch):
    """Issue 47 item 1 x 2: a job whose record is final is in no worker's hands, so the
    lookup does not SCAN the keyspace for private lists; an open record still does."""
    from redis import Redis

    scans: list[str] = []
    scan_iter = Redis.scan_iter
    monkeypatch.setattr(Redis, "scan_iter", lambda self, *a, **kw: scans.append(kw.get("match")) or scan_iter(self, *a, **kw))
    for state in ("complete", "failed", "revoked"):
        store.write(redis_db, state[0] * 24, {"state": state, "class": RECORD}, 60)
        status = http_api().get(f"/jobs/{state[0] * 24}").json()
        assert (status["state"], status["result"]["state"]) == ("unknown", state)
    assert scans == []
    store.write(redis_db, "e" * 24, {"state": "enqueued", "class": RECORD}, 60)
    redis_db.lpush("queue:mail|box|123|n0nce|0", _raw_job("e" * 24, queue="mail"))
    status = http_api().get(f"/jobs/{'e' * 24}").json()
    assert (status["state"], status["queue"]) == ("running", "mail") and len(scans) == 1


def test_a_tracked_job_shows_its_progress_and_no_traceback(http_api, redis_db):
    """Issue 47 items 1 and 2: the status endpoint reads the same record as
    ``wurk_django.status.get``; the stored tracebacks stay out of the answer."""
    store.write(redis_db, "p" * 24, {"state": "running", "class": RECORD, "progress": 40, "message": "resizing",
                                     "errors": [{"exception_class_path": "OSError", "message": "disk",
                                                 "traceback": "Traceback: secret-path"}]}, 60)
    status = http_api().get(f"/jobs/{'p' * 24}").json()
    assert (status["result"]["progress"], status["result"]["message"]) == (40, "resizing")
    assert status["result"]["error"] == {"class": "OSError", "message": "disk"}
    assert "errors" not in status["result"] and "secret-path" not in json.dumps(status)


def test_a_jid_that_cannot_be_one_is_not_found(http_api):
    assert_problem(http_api().get("/jobs/*"), 404, "not-found")


def test_delete_removes_a_scheduled_or_retrying_job_only(http_api, redis_db):
    api = http_api()
    scheduled_jid = api.post("/jobs", {"class": RECORD, "args": ["s"], "in": 600}).json()["jid"]
    queued_jid = api.post("/jobs", {"class": RECORD, "args": ["q"]}).json()["jid"]
    redis_db.zadd("retry", {_raw_job("r" * 24): time.time() + 60})
    redis_db.zadd("dead", {_raw_job("d" * 24): time.time()})

    assert api.delete(f"/jobs/{scheduled_jid}").json() == {"jid": scheduled_jid, "deleted": True,
                                                           "state": "scheduled"}
    assert api.delete(f"/jobs/{'r' * 24}").json()["state"] == "retry"
    assert redis_db.zcard("schedule") == 0 and redis_db.zcard("retry") == 0
    assert_problem(api.delete(f"/jobs/{scheduled_jid}"), 404, "job-not-found")
    assert assert_problem(api.delete(f"/jobs/{queued_jid}"), 409, "job-not-deletable")["state"] == "queued"
    assert assert_problem(api.delete(f"/jobs/{'d' * 24}"), 409, "job-not-deletable")["state"] == "dead"
    assert redis_db.llen("queue:default") == 1 and redis_db.zcard("dead") == 1


def test_queues_and_processes(http_api, redis_db):
    api = http_api()
    api.post("/jobs", {"class": RECORD, "args": [1], "queue": "a"})
    api.post("/jobs", {"class": RECORD, "args": [2], "queue": "a"})
    redis_db.sadd("paused", "a")
    listed = api.get("/queues").json()["queues"]
    assert [(q["name"], q["size"], q["paused"]) for q in listed] == [("a", 2, True)]
    assert listed[0]["latency"] >= 0
    assert api.get("/processes").json() == {"processes": []}


def test_a_redis_outage_is_a_503_problem(http_api):
    from unittest import mock

    import redis

    with mock.patch("wurk_django.http_api.views.status.job_status", side_effect=redis.ConnectionError("down")):
        response = http_api().get("/jobs/abc")
    assert_problem(response, 503, "redis-unavailable")
    assert response["Retry-After"] == "5"
