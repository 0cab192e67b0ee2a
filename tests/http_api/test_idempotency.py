"""``Idempotency-Key``: one key, one job, the first answer replayed (issue 47 item 1)."""

from __future__ import annotations

import threading

from tests.http_api.access import assert_problem
from tests.http_api.conftest import ADMIN, ENQUEUER
from tests.support import wurk_settings
from wurk_django import keys
from wurk_django.client.push import Client

JOB = {"class": "tests.jobsapp.jobs.RecordJob", "args": ["once"]}


def test_a_repeat_gets_the_first_answer_and_pushes_nothing(http_api, redis_db):
    api = http_api()
    first = api.post("/jobs", JOB, **{"Idempotency-Key": "order-42"})
    again = api.post("/jobs", JOB, **{"Idempotency-Key": "order-42"})
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json()
    assert again["Idempotent-Replayed"] == "true" and not first.has_header("Idempotent-Replayed")
    assert redis_db.llen("queue:default") == 1
    assert api.post("/jobs", JOB, **{"Idempotency-Key": "order-43"}).json()["jid"] != first.json()["jid"]
    assert redis_db.llen("queue:default") == 2


def test_the_answer_is_kept_for_the_ttl(http_api, redis_db):
    with wurk_settings(HTTP_API_IDEMPOTENCY_TTL=120):
        http_api().post("/jobs", JOB, **{"Idempotency-Key": "k"})
    (key,) = redis_db.keys(keys.HTTP_API_PREFIX + "idempotency:*")
    assert 100 < redis_db.ttl(key) <= 120
    assert key.decode().startswith(keys.HTTP_API_PREFIX + "idempotency:boss:")  # per token


def test_a_key_reused_for_another_request_is_422(http_api, redis_db):
    api = http_api()
    api.post("/jobs", JOB, **{"Idempotency-Key": "k"})
    assert_problem(api.post("/jobs", {**JOB, "args": ["other"]}, **{"Idempotency-Key": "k"}),
                   422, "idempotency-key-reused")
    assert_problem(api.post("/jobs/bulk", {**JOB, "args": [["once"]]}, **{"Idempotency-Key": "k"}),
                   422, "idempotency-key-reused")
    assert redis_db.llen("queue:default") == 1


def test_keys_are_per_token(http_api, redis_db):
    a = http_api(ADMIN).post("/jobs", JOB, **{"Idempotency-Key": "k"}).json()["jid"]
    b = http_api(ENQUEUER).post("/jobs", JOB, **{"Idempotency-Key": "k"}).json()["jid"]
    assert a != b and redis_db.llen("queue:default") == 2


def test_a_refused_request_leaves_the_key_free(http_api, redis_db):
    api = http_api()
    assert_problem(api.post("/jobs", {**JOB, "queue": "bad\x07"}, **{"Idempotency-Key": "k"}), 422, "invalid-job")
    assert api.post("/jobs", {**JOB, "queue": "bad\x07"}, **{"Idempotency-Key": "k"}).status_code == 422
    assert redis_db.keys(keys.HTTP_API_PREFIX + "*") == []


def test_a_bad_key_is_400(http_api):
    assert_problem(http_api().post("/jobs", JOB, **{"Idempotency-Key": "x" * 256}), 400, "invalid-idempotency-key")


def test_a_request_arriving_while_the_first_is_answered_is_409_and_pushes_nothing(http_api, redis_db, monkeypatch):
    inside, release = threading.Event(), threading.Event()
    real = Client.push

    def slow_push(self, item, *args, **kwargs):
        inside.set()
        assert release.wait(30)
        return real(self, item, *args, **kwargs)

    monkeypatch.setattr(Client, "push", slow_push)
    answers = {}
    first = threading.Thread(target=lambda: answers.update(first=http_api().post("/jobs", JOB,
                                                                               **{"Idempotency-Key": "k"})))
    first.start()
    assert inside.wait(30)
    response = http_api().post("/jobs", JOB, **{"Idempotency-Key": "k"})
    assert_problem(response, 409, "idempotency-key-in-use")
    assert response["Retry-After"] == "1"
    release.set()
    first.join(30)
    assert answers["first"].status_code == 201
    assert redis_db.llen("queue:default") == 1


def test_concurrent_requests_with_one_key_make_one_job(http_api, redis_db):
    barrier = threading.Barrier(8)
    answers = []

    def post():
        api = http_api()
        barrier.wait(30)
        answers.append(api.post("/jobs", JOB, **{"Idempotency-Key": "race"}))

    threads = [threading.Thread(target=post) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert redis_db.llen("queue:default") == 1
    jid = redis_db.lindex("queue:default", 0)
    created = [a for a in answers if a.status_code == 201]
    assert created and all(a.json()["jid"] in jid.decode() for a in created)
    assert all(a.status_code in (201, 409) for a in answers)
