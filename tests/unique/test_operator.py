"""Unique jobs from the admin and the data API (issue 28 item 5): a retry that a held lock
stops says so and keeps the entry; deleting a unique job frees its lock; a lock can be
released by its digest."""

from __future__ import annotations

import time

import pytest

from tests.admin.conftest import BASE
from tests.support import wurk_settings
from tests.unique.jobs import SyncAccount
from wurk_django import payload
from wurk_django.api import DeadSet, NotPushed, Queue, RetrySet
from wurk_django.unique import digest_of, holder, release_digest
from wurk_django.unique import lock as unique_lock

SYNC = "tests.unique.jobs.SyncAccount"


@pytest.fixture(autouse=True)
def unique_on():
    with wurk_settings(UNIQUE_JOBS=True):
        yield


def _dead_copy(jid: str = "d" * 24) -> dict:
    job = {"class": SYNC, "queue": "default", "args": [42], "jid": jid, "unique_for": 300, "retry": True,
           "created_at": payload.now_ms(), "error_class": "RuntimeError", "error_message": "boom",
           "failed_at": payload.now_ms(), "retry_count": 3}
    return job


def _bury(redis_db, job: dict) -> None:
    redis_db.zadd("dead", {payload.dumps(job): time.time()})


def test_a_retry_the_lock_stops_raises_and_keeps_the_entry(redis_db):
    newer = SyncAccount.perform_async(42)  # an identical job is pending and holds the lock
    _bury(redis_db, _dead_copy())
    entry = next(iter(DeadSet()))
    with pytest.raises(NotPushed, match=f"identical unique job \\(jid={newer}\\) holds its lock"):
        entry.retry()
    assert DeadSet().size == 1
    assert redis_db.llen("queue:default") == 1


def test_retry_all_keeps_what_it_cannot_push_and_says_why(redis_db):
    SyncAccount.perform_async(42)
    redis_db.zadd("retry", {payload.dumps(_dead_copy()): time.time() + 60})
    refused: list[str] = []
    assert RetrySet().retry_all(refused) == 0
    assert RetrySet().size == 1 and len(refused) == 1 and "holds its lock" in refused[0]


def test_the_admin_says_why_and_keeps_the_entry(admin_client, redis_db):
    SyncAccount.perform_async(42)
    _bury(redis_db, _dead_copy())
    key = admin_client.get(BASE + "dead/").context["page"].items[0]["key"]
    response = admin_client.post(BASE + "dead/", {"action": "retry", "key": [key]}, follow=True)
    shown = [str(m) for m in response.context["messages"]]
    assert any("holds its lock" in m for m in shown), shown
    assert not any("Retry now: 1 job" in m for m in shown), shown
    assert DeadSet().size == 1


def test_deleting_a_unique_job_frees_the_lock_it_held(redis_db):
    jid = SyncAccount.perform_async(42)
    digest = digest_of(next(iter(Queue("default"))).item)
    assert holder(redis_db, digest) == jid
    assert next(iter(Queue("default"))).delete()
    assert holder(redis_db, digest) is None
    assert SyncAccount.perform_async(42)  # no longer dropped

    job = _dead_copy("r" * 24)
    redis_db.set(unique_lock.lock_key(job), job["jid"])
    redis_db.zadd("retry", {payload.dumps(job): time.time() + 60})
    assert next(iter(RetrySet())).delete()
    assert redis_db.get(unique_lock.lock_key(job)) is None


def test_deleting_leaves_a_lock_another_job_holds(redis_db):
    newer = SyncAccount.perform_async(42)
    _bury(redis_db, _dead_copy())
    assert next(iter(DeadSet())).delete()
    assert holder(redis_db, digest_of(_dead_copy())) == newer


def test_release_by_digest_from_the_api_and_the_admin(admin_client, redis_db):
    SyncAccount.perform_async(42)
    digest = digest_of(_dead_copy())
    with pytest.raises(ValueError, match="64 lowercase hex digits"):
        release_digest(redis_db, "queue:default")
    assert release_digest(redis_db, digest) is True
    assert release_digest(redis_db, digest) is False

    newer = SyncAccount.perform_async(42)
    _bury(redis_db, _dead_copy())
    key = admin_client.get(BASE + "dead/").context["page"].items[0]["key"]
    page = admin_client.get(BASE + f"dead/job/{key}/").content.decode()
    assert f"held by jid {newer}" in page and 'value="release_lock"' in page
    admin_client.post(BASE + f"dead/job/{key}/", {"action": "release_lock"})
    assert holder(redis_db, digest) is None
    entry = next(iter(DeadSet()))
    assert entry.retry() is True  # nothing holds the lock now
