"""The push path's caches (issue 30 item 1): what a push reuses must never be stale.

A push reuses the client middleware chain (per config and registry state), the
normalized template of a plain ``perform_async`` (per config and class options) and
the Redis client (per config, process and pool generation). Each test changes what
one of them was built from after a first push, and checks that the next push sees it.
"""

from __future__ import annotations

import json
import os

import pytest

from tests.jobsapp.jobs import RecordJob
from tests.support import queued, wurk_settings
from wurk_django import middleware
from wurk_django.client.push import Client
from wurk_django.conf import get_config
from wurk_django.job import Job
from wurk_django.redis import connection


class _Tag:
    """A client middleware that marks the job it pushes."""

    def __call__(self, job_class, job, queue, redis, call_next):
        job["tagged_by"] = type(self).__name__
        return call_next()


class _Other(_Tag):
    pass


class CachedOptionsJob(Job):
    queue = "first"

    def perform(self, *args):
        pass


def test_a_middleware_registered_after_a_push_runs_on_the_next_push(redis_db):
    RecordJob.perform_async(1)
    try:
        middleware.register("client", "test-late", _Tag, position=99)
        RecordJob.perform_async(2)
    finally:
        middleware.unregister("client", "test-late")
    RecordJob.perform_async(3)  # and unregistering is seen too
    tags = {job["args"][0]: job.get("tagged_by") for job in queued(redis_db)}
    assert tags == {1: None, 2: "_Tag", 3: None}


def test_a_settings_change_takes_effect_on_the_next_push(redis_db):
    RecordJob.perform_async(1)
    with wurk_settings(CLIENT_MIDDLEWARE=[_Other], DEFAULT_JOB_OPTIONS={"retry": 7, "queue": "default"}):
        RecordJob.perform_async(2)
    RecordJob.perform_async(3)
    jobs = {job["args"][0]: job for job in queued(redis_db)}
    assert [jobs[n].get("tagged_by") for n in (1, 2, 3)] == [None, "_Other", None]
    assert [jobs[n]["retry"] for n in (1, 2, 3)] == [True, 7, True]


def test_a_settings_change_of_redis_url_sends_the_next_push_there(redis_db):
    RecordJob.perform_async(1)
    url = connection.get_redis().connection_pool.connection_kwargs
    other_db = 2 if int(url["db"]) != 2 else 3
    other = f"redis://127.0.0.1:{url.get('port', 6379)}/{other_db}"
    import redis

    raw = redis.Redis.from_url(other)
    before = raw.llen("queue:default")
    try:
        with wurk_settings(REDIS_URL=other):
            RecordJob.perform_async(2)
        assert raw.llen("queue:default") == before + 1
    finally:
        for payload in raw.lrange("queue:default", 0, -1):
            if json.loads(payload).get("args") == [2]:
                raw.lrem("queue:default", 1, payload)
        raw.close()
    assert [job["args"] for job in queued(redis_db)] == [[1]]


def test_a_class_option_changed_after_a_push_is_pushed_with(redis_db, monkeypatch):
    CachedOptionsJob.perform_async(1)
    monkeypatch.setattr(CachedOptionsJob, "queue", "second")
    monkeypatch.setattr(CachedOptionsJob, "retry", 2)
    CachedOptionsJob.perform_async(2)
    first, second = queued(redis_db, "first"), queued(redis_db, "second")
    assert [job["args"] for job in first] == [[1]] and [job["args"] for job in second] == [[2]]
    assert second[0]["retry"] == 2 and first[0]["retry"] is True


def test_plain_pushes_get_their_own_jid_created_at_and_args(redis_db):
    jids = [RecordJob.perform_async(n) for n in range(3)]
    jobs = queued(redis_db)
    assert sorted(job["jid"] for job in jobs) == sorted(jids) and len(set(jids)) == 3
    assert sorted(job["args"][0] for job in jobs) == [0, 1, 2]
    # The key order of a normalized job (Sidekiq's), the same for the first push and a cached one.
    orders = {tuple(job) for job in jobs}
    assert len(orders) == 1


def test_changing_a_clients_middleware_changes_no_other_client(redis_db):
    mine = Client()
    mine.middleware.add(_Tag)
    mine.push({"class": RecordJob, "args": [1]})
    Client().push({"class": RecordJob, "args": [2]})
    RecordJob.perform_async(3)
    tags = {job["args"][0]: job.get("tagged_by") for job in queued(redis_db)}
    assert tags == {1: "_Tag", 2: None, 3: None}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_pushes_on_its_own_connection(redis_db):
    RecordJob.perform_async("parent-before")
    parent_client = connection.client_for(get_config())
    parent_conn = parent_client.client_id()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, push, and leave without running the parent's exit hooks
        status = 1
        try:
            os.close(read)
            child_client = connection.client_for(get_config())
            RecordJob.perform_async("child")
            report = {"same_client": child_client is parent_client, "conn": child_client.client_id()}
            os.write(write, json.dumps(report).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read) as pipe:
        report = json.loads(pipe.read() or "{}")
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert report["same_client"] is False and report["conn"] != parent_conn
    RecordJob.perform_async("parent-after")  # the parent's connection is still its own, unharmed
    assert sorted(job["args"][0] for job in queued(redis_db)) == ["child", "parent-after", "parent-before"]
