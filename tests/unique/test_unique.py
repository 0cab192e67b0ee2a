"""Unique jobs on a real Redis: lock on push, release after the run or on death (ENT-201..209)."""

from __future__ import annotations

import datetime as dt
import hashlib
import logging

import pytest

from tests.support import wurk_settings
from tests.unique.jobs import ByAccount, CriticalSync, FailingUnique, NoRetryUnique, StartUnique, SyncAccount
from wurk_django import middleware, payload
from wurk_django.api import DeadSet, RetrySet
from wurk_django.client.push import Client
from wurk_django.conf import get_config
from wurk_django.outcome import Outcome
from wurk_django.server import death
from wurk_django.server.retry import Retrier
from wurk_django.unique import UniqueConfigurationError, lock_key, locked, release_if_owner
from wurk_django.unique import lock as unique_lock

SYNC = "tests.unique.jobs.SyncAccount"


@pytest.fixture(autouse=True)
def unique_on():
    with wurk_settings(UNIQUE_JOBS=True):
        yield


def key_for(klass: str, queue: str, args: list) -> str:
    # ENT-203: unique: + sha256 of Ruby's JSON.dump([class, queue, args]), written out by hand.
    text = '["' + klass + '","' + queue + '",' + payload.dumps(args).decode() + "]"
    return "unique:" + hashlib.sha256(text.encode()).hexdigest()


def test_first_push_wins_and_duplicate_is_dropped(redis_db, caplog):  # ENT-204
    jid = SyncAccount.perform_async(42)
    assert jid
    with caplog.at_level(logging.INFO, logger="wurk_django.client.push"):
        assert SyncAccount.perform_async(42) is None
    assert f"duplicate {SYNC} dropped" in caplog.text and f"blocked by jid={jid}" in caplog.text
    assert SyncAccount.perform_async(43)  # other arguments: another lock
    assert redis_db.llen("queue:default") == 2
    key = key_for(SYNC, "default", [42])
    assert redis_db.get(key) == jid.encode()
    assert 295 <= redis_db.ttl(key) <= 300
    assert locked(SyncAccount, [42]) == jid
    assert locked("default", SYNC, [42]) == jid
    assert locked(SyncAccount, [44]) is None


def test_payload_carries_whole_seconds(redis_db):  # ENT-202
    StartUnique.perform_async(1)
    job = payload.loads(redis_db.lindex("queue:default", 0))
    assert job["unique_for"] == 120 and job["unique_until"] == "start"
    SyncAccount.set(unique_for=61.9).perform_async(2)
    assert payload.loads(redis_db.lindex("queue:default", 0))["unique_for"] == 61
    assert 55 <= redis_db.ttl(key_for(SYNC, "default", [2])) <= 61


def test_set_overrides_and_false_turns_it_off(redis_db):
    assert SyncAccount.set(unique_for=60).perform_async(5)
    assert 55 <= redis_db.ttl(key_for(SYNC, "default", [5])) <= 60
    assert SyncAccount.set(unique_for=False).perform_async(5)  # not unique for this push
    assert SyncAccount.set(unique_for=dt.timedelta(seconds=90)).perform_async(6)
    assert 85 <= redis_db.ttl(key_for(SYNC, "default", [6])) <= 90


@pytest.mark.parametrize("bad", ["300", True, 0, 0.5, -5, dt.timedelta(0), [300]])
def test_bad_unique_for_is_refused_at_the_call_site(redis_db, bad):
    with pytest.raises(ValueError, match="unique_for"):
        SyncAccount.set(unique_for=bad).perform_async(1)
    assert redis_db.llen("queue:default") == 0


def test_an_unknown_unique_until_counts_as_success(redis_db, caplog):
    # ENT-202: any other value is "success"; the push goes ahead, with a warning once.
    with caplog.at_level(logging.WARNING, logger="wurk_django.client.push"):
        jid = SyncAccount.set(unique_until="sucess").perform_async(1)
        assert jid is not None
        assert SyncAccount.set(unique_until="sucess").perform_async(1) is None  # the lock holds
    assert caplog.text.count("unique_until 'sucess' is not 'success' or 'start'") == 1
    [raw] = redis_db.lrange("queue:default", 0, -1)
    assert payload.loads(raw)["unique_until"] == "sucess"  # stored as given, read as success


def test_off_without_the_setting(redis_db):  # ENT-201
    with wurk_settings(UNIQUE_JOBS=False):
        assert SyncAccount.perform_async(42)
        assert SyncAccount.perform_async(42)
        assert locked(SyncAccount, [42]) is None
    assert redis_db.llen("queue:default") == 2
    assert not redis_db.keys("unique:*")


def test_scheduled_lock_spans_the_wait(redis_db):  # ENT-204 step 1
    jid = SyncAccount.perform_in(1000, 7)
    assert jid and SyncAccount.perform_async(7) is None
    ttl = redis_db.ttl(key_for(SYNC, "default", [7]))
    assert 1295 <= ttl <= 1301
    assert unique_lock.lifetime(300, 1_000.2, now=900.0) == 401
    assert unique_lock.lifetime(300, 800.0, now=900.0) == 300
    assert unique_lock.lifetime(300, None, now=900.0) == 300


def test_class_queue_and_custom_context(redis_db):  # ENT-203, ENT-208
    jid = CriticalSync.perform_async(1)
    assert locked(CriticalSync, [1]) == jid  # the class's own queue
    assert redis_db.get(key_for("tests.unique.jobs.CriticalSync", "critical", [1])) == jid.encode()
    first = ByAccount.perform_async(9, "a")
    assert ByAccount.perform_async(9, "b") is None  # same account, other note: a duplicate
    assert ByAccount.perform_async(10, "a")
    assert lock_key({"class": "tests.unique.jobs.ByAccount", "queue": "x", "args": [9, "z"]}) == \
        "unique:" + hashlib.sha256(b'["tests.unique.jobs.ByAccount",9]').hexdigest()
    assert locked(ByAccount, [9, "whatever"]) == first


def test_bulk_returns_none_at_each_dropped_index(redis_db):  # ENT-204 step 6
    SyncAccount.perform_async(2)
    jids = SyncAccount.perform_bulk([[1], [2], [1], [3]])
    assert jids[0] and jids[3] and jids[1] is None and jids[2] is None
    assert redis_db.llen("queue:default") == 3


def test_same_jid_repush_passes_its_own_lock(redis_db):  # ENT-204 step 4: retry/promotion/reschedule
    jid = SyncAccount.perform_async(8)
    job = payload.loads(redis_db.rpop("queue:default"))
    job.pop("enqueued_at")
    assert Client().push(dict(job)) == jid
    other = {**job, "jid": payload.new_jid()}
    assert Client().push(other) is None


def test_release_if_owner_is_compare_and_delete(redis_db):  # ENT-206
    key = "unique:abc"
    redis_db.set(key, "new-owner")
    assert release_if_owner(redis_db, key, "stale-owner") is False
    assert redis_db.get(key) == b"new-owner"
    assert release_if_owner(redis_db, key, "new-owner") is True
    assert redis_db.get(key) is None
    assert release_if_owner(redis_db, key, "new-owner") is False


def run_server_chain(job: dict, perform) -> None:
    from wurk_django.middleware import server_chain

    chain = server_chain(get_config())
    chain.invoke((None, job, job["queue"]), perform)


def fetched(redis_db) -> dict:
    return payload.loads(redis_db.rpop("queue:default"))


def test_success_mode_releases_after_success_only(redis_db):  # ENT-205
    jid = SyncAccount.perform_async(11)
    job = fetched(redis_db)
    with pytest.raises(RuntimeError):
        run_server_chain(job, lambda: (_ for _ in ()).throw(RuntimeError("boom")))
    assert locked(SyncAccount, [11]) == jid  # a failure keeps it: retries stay unique
    seen = []
    run_server_chain(job, lambda: seen.append(locked(SyncAccount, [11])) or True)
    assert seen == [jid]  # still held while perform runs
    assert locked(SyncAccount, [11]) is None
    assert SyncAccount.perform_async(11)


def test_start_mode_releases_before_perform(redis_db):  # ENT-205
    StartUnique.perform_async(12)
    job = fetched(redis_db)
    seen = []
    with pytest.raises(RuntimeError):
        run_server_chain(job, lambda: seen.append(locked(StartUnique, [12])) or (_ for _ in ()).throw(RuntimeError()))
    assert seen == [None]


def test_release_failure_is_logged_not_raised(redis_db, monkeypatch, caplog):  # ENT-205
    SyncAccount.perform_async(13)
    job = fetched(redis_db)

    def broken(*args, **kwargs):
        raise ConnectionError("redis went away")

    monkeypatch.setattr(unique_lock, "release_if_owner", broken)
    with caplog.at_level(logging.WARNING, logger="wurk_django.worker"):
        run_server_chain(job, lambda: True)
    assert "could not release the unique lock" in caplog.text


def test_a_late_release_cannot_free_a_newer_owner(redis_db):  # ENT-206 through the server path
    SyncAccount.perform_async(14)
    job = fetched(redis_db)
    redis_db.delete(lock_key(job))  # the lock expired while the job waited...
    newer = SyncAccount.perform_async(14)  # ...and a new push took it
    run_server_chain(job, lambda: True)  # the old job finishes and releases
    assert locked(SyncAccount, [14]) == newer


def test_exhausted_death_releases(redis_db):  # ENT-207
    jid = FailingUnique.set(retry=0).perform_async(15)
    raw = redis_db.rpop("queue:default")
    assert Retrier(get_config()).book(FailingUnique, raw, "default", RuntimeError("sync failed")) is Outcome.DEAD
    assert DeadSet().size == 1
    assert locked(FailingUnique, [15]) is None
    assert jid


def test_retry_keeps_the_lock_then_no_retry_death_releases(redis_db):  # ENT-207, ENT-209
    jid = FailingUnique.perform_async(16)
    raw = redis_db.rpop("queue:default")
    assert Retrier(get_config()).book(FailingUnique, raw, "default", RuntimeError("sync failed")) is Outcome.RETRIED
    assert RetrySet().size == 1 and locked(FailingUnique, [16]) == jid
    NoRetryUnique.perform_async(17)
    job = fetched(redis_db)
    death.die(job, RuntimeError("no retry"), reason=death.NO_RETRY, config=get_config())
    assert locked(NoRetryUnique, [17]) is None


def test_manual_kill_keeps_the_lock(redis_db):  # ENT-207: an admin/API kill is not an automatic death
    jid = FailingUnique.perform_async(18)
    raw = redis_db.rpop("queue:default")
    assert Retrier(get_config()).book(FailingUnique, raw, "default", RuntimeError("sync failed")) is Outcome.RETRIED
    entry = next(iter(RetrySet()))
    assert entry.kill()  # what the admin's Kill button calls
    assert DeadSet().size == 1
    assert locked(FailingUnique, [18]) == jid
    DeadSet().kill(payload.dumps({"class": "tests.unique.jobs.FailingUnique", "queue": "default",
                                  "args": [18], "jid": jid, "unique_for": 300}))
    assert locked(FailingUnique, [18]) == jid
    # A poison death (automatic) does release it.
    death.die({"class": "tests.unique.jobs.FailingUnique", "queue": "default", "args": [18], "jid": jid,
               "unique_for": 300}, RuntimeError("poison"), reason=death.POISON, config=get_config())
    assert locked(FailingUnique, [18]) is None


class Recorder:
    seen: list = []

    def __call__(self, job_class, job, queue, redis, call_next):
        Recorder.seen.append(job["jid"])
        return call_next()


class Stopper:
    def __call__(self, job_class, job, queue, redis, call_next):
        return None


def test_dropped_duplicate_never_reaches_inner_middleware(redis_db):  # ENT-209: never joins a batch
    Recorder.seen = []
    middleware.register("client", "test-batch-stand-in", Recorder, position=-20)
    try:
        first = SyncAccount.perform_async(19)
        assert SyncAccount.perform_async(19) is None
    finally:
        middleware.unregister("client", "test-batch-stand-in")
    assert Recorder.seen == [first]


def test_lock_is_given_back_when_an_inner_middleware_stops_the_push(redis_db):
    middleware.register("client", "test-stopper", Stopper, position=-10)
    try:
        assert SyncAccount.perform_async(20) is None
    finally:
        middleware.unregister("client", "test-stopper")
    assert locked(SyncAccount, [20]) is None
    assert SyncAccount.perform_async(20)


def test_lock_is_given_back_when_arguments_are_refused(redis_db):
    with pytest.raises(ValueError, match="native JSON"):
        SyncAccount.perform_async(dt.date(2024, 1, 1))
    assert not redis_db.keys("unique:*")


def test_unique_and_encrypt_are_refused_together(redis_db):  # ENT-204 step 2
    with pytest.raises(UniqueConfigurationError, match="both unique"):
        SyncAccount.set(encrypt=True).perform_async(None, "secret")
    assert redis_db.llen("queue:default") == 0 and not redis_db.keys("unique:*")


def test_perform_inline_and_test_modes_take_no_lock(redis_db):  # ENT-209
    from wurk_django import testing

    assert SyncAccount.perform_inline(21)
    with testing.fake():
        assert SyncAccount.perform_async(21) and SyncAccount.perform_async(21)
        assert len(testing.jobs(SyncAccount)) == 2
        testing.clear_all()
    assert not redis_db.keys("unique:*")


def test_an_expired_job_releases_its_lock(redis_db):  # PRO-311, ENT-204
    from wurk_django import registry
    from wurk_django.middleware import server_chain

    with wurk_settings(UNIQUE_JOBS=True):
        jid = SyncAccount.set(expires_in=60).perform_async(7)
        assert locked(SyncAccount, [7]) == jid
        job = payload.loads(redis_db.rpop("queue:default"))
        job["expiry"] = job["created_at"] / 1000 - 1
        instance = registry.resolve(job["class"])()
        ran = []
        server_chain(get_config()).invoke((instance, job, "default"), lambda: ran.append(1))
        assert ran == []  # skipped, never performed
        assert locked(SyncAccount, [7]) is None
