"""Keyword arguments on the wire (issue 27 item 2): a top-level ``kwargs`` object beside ``args``."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from tests.jobsapp.jobs import RecordJob
from wurk_django import Job, job, payload
from wurk_django.client.push import Client


class KeywordJob(Job):
    name = "tests.celery_compat.KeywordJob"

    def perform(self, key, *, label="none", count=1):
        from wurk_django.redis.app import redis_client

        redis_client().rpush(key, f"{label}x{count}")


@job(name="tests.celery_compat.keyword_function")
def keyword_function(key, suffix="."):
    from wurk_django.redis.app import redis_client

    redis_client().rpush(key, f"fn{suffix}")


def _queued(redis_db, queue="default") -> dict:
    [raw] = redis_db.lrange(f"queue:{queue}", 0, -1)
    return json.loads(raw)


def test_kwargs_travel_in_their_own_object_and_a_job_without_them_is_unchanged(redis_db):
    KeywordJob.perform_async("k", label="a", count=2)
    item = _queued(redis_db)
    assert item["args"] == ["k"] and item["kwargs"] == {"label": "a", "count": 2}
    redis_db.delete("queue:default")
    KeywordJob.perform_async("k")
    assert "kwargs" not in _queued(redis_db)


def test_perform_in_and_set_carry_kwargs(redis_db):
    KeywordJob.set(queue="celery_kw").perform_in(60, "k", label="later")
    [raw] = redis_db.zrange("schedule", 0, -1)
    assert json.loads(raw)["kwargs"] == {"label": "later"}


@pytest.mark.parametrize(("kwargs", "message"), [
    ([1, 2], "job kwargs must be a dict"),
    ({1: "x"}, "keys must be strings"),
])
def test_bad_kwargs_are_refused_at_the_call_site(redis_db, kwargs, message):
    with pytest.raises(ValueError, match=message):
        Client().push({"class": RecordJob, "args": [], "kwargs": kwargs})
    assert redis_db.llen("queue:default") == 0


def test_a_non_json_keyword_value_is_named(redis_db):
    with pytest.raises(ValueError, match=r"is at kwargs\['when'\]"):
        KeywordJob.perform_async("k", when=dt.datetime(2024, 5, 6))


def test_worker_calls_perform_with_the_kwargs(redis_db, drain):
    KeywordJob.perform_async("test:kw", label="b", count=3)
    keyword_function.perform_async("test:kw", suffix="!")
    drain()
    assert sorted(redis_db.lrange("test:kw", 0, -1)) == [b"bx3", b"fn!"]


def test_perform_inline_passes_kwargs(redis_db):
    assert KeywordJob.perform_inline("test:kw", label="inline") is True
    assert redis_db.lrange("test:kw", 0, -1) == [b"inlinex1"]


@pytest.mark.parametrize("bad", [[1], "x", 3])
def test_a_fetched_job_with_malformed_kwargs_goes_to_the_dead_set(redis_db, drain, bad):
    good = {"class": "tests.celery_compat.KeywordJob", "queue": "default", "args": ["test:kw"],
            "jid": "a" * 24, "retry": True}
    redis_db.lpush("queue:default", payload.dumps({**good, "jid": "b" * 24, "kwargs": bad}))
    redis_db.lpush("queue:default", payload.dumps(good))
    drain()  # the worker lives on and runs the next job
    assert redis_db.lrange("test:kw", 0, -1) == [b"nonex1"]
    [dead] = redis_db.zrange("dead", 0, -1)
    dead = json.loads(dead)
    assert dead["jid"] == "b" * 24 and "'kwargs' must be an object" in dead["error_message"]
    assert redis_db.zcard("retry") == 0


@pytest.mark.django_db(transaction=True)
def test_on_commit_pushes_check_kwargs_at_the_call_and_keep_them(redis_db):
    from django.db import transaction

    with transaction.atomic():
        with pytest.raises(ValueError, match=r"kwargs\['when'\]"):
            KeywordJob.perform_async_on_commit("k", when=dt.date(2024, 1, 1))
        KeywordJob.perform_async_on_commit("k", label="committed")
        assert redis_db.llen("queue:default") == 0
    assert _queued(redis_db)["kwargs"] == {"label": "committed"}


def test_unique_digest_tells_jobs_apart_by_kwargs_only_when_they_have_them():
    from wurk_django.unique.lock import context_of

    plain = {"class": "C", "queue": "q", "args": [1]}
    assert context_of(plain) == ["C", "q", [1]]  # Sidekiq's digest input, unchanged
    assert context_of({**plain, "kwargs": {"a": 1}}) != context_of({**plain, "kwargs": {"a": 2}})
