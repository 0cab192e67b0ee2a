"""Feature switches on one side only (issue 26 item 4, ENT-201, ENT-205, ENT-608, ENT-610):
a unique job whose pusher took a lock runs on a worker with ``UNIQUE_JOBS`` off and
still frees the lock; an ``encrypt`` job pushed in plain text (Ruby with encryption
off) runs with a warning and is masked on every admin page, the batch page too.
Jobs are written as a Ruby pusher writes them; real worker processes run them."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests.admin.conftest import BASE, make_user
from tests.support import wait_for
from wurk_django import payload

pytestmark = pytest.mark.slow

FAST = {"POLL_INTERVAL_AVERAGE": 1, "LOG_FLUSH_INTERVAL": 0, "IMPORT_ON_MISS": ["tests"]}
SECRET = "plain-secret-5150"


def _lock_key(klass: str, queue: str, args: list) -> str:
    # Sidekiq Enterprise / Ruby wurk: unique: + sha256 of JSON.dump([class, queue, args]).
    text = json.dumps([klass, queue, args], separators=(",", ":"))
    return "unique:" + hashlib.sha256(text.encode()).hexdigest()


def _push_ruby(redis_db, klass: str, args: list, **extra) -> str:
    jid = payload.new_jid()
    job = {"retry": True, "queue": "default", "class": klass, "args": args, "jid": jid,
           "created_at": payload.now_ms(), "enqueued_at": payload.now_ms(), **extra}
    redis_db.sadd("queues", "default")
    redis_db.lpush("queue:default", json.dumps(job, separators=(",", ":")))
    return jid


def test_a_ruby_unique_job_frees_its_lock_where_unique_jobs_is_off(redis_db, worker_factory):
    done = _lock_key("tests.unique.jobs.SyncAccount", "default", [7])
    dies = _lock_key("tests.unique.jobs.NoRetryUnique", "default", [8])
    other = _lock_key("tests.unique.jobs.SyncAccount", "default", [9])
    # What a Ruby `unique_for: 3600` push leaves: the lock holds the jid, the job carries the TTL.
    redis_db.set(done, _push_ruby(redis_db, "tests.unique.jobs.SyncAccount", [7], unique_for=3600), ex=3600)
    redis_db.set(dies, _push_ruby(redis_db, "tests.unique.jobs.NoRetryUnique", [8], unique_for=3600,
                                  retry=0), ex=3600)
    # A lock held by a newer job (not this one) is not this job's to free.
    _push_ruby(redis_db, "tests.unique.jobs.SyncAccount", [9], unique_for=3600)
    redis_db.set(other, "anotherjid0000000000000", ex=3600)
    worker_factory("-c", "1", env={"WURK_TEST_EXTRA": json.dumps({**FAST, "UNIQUE_JOBS": False})})
    wait_for(lambda: sorted(redis_db.lrange("test:synced", 0, -1)) == [b"7", b"9"] and redis_db.zcard("dead") == 1,
             timeout=60, message="the unique jobs to run and die")
    wait_for(lambda: not redis_db.exists(done) and not redis_db.exists(dies), timeout=30,
             message="both locks released")
    assert redis_db.get(other) == b"anotherjid0000000000000"


@pytest.mark.parametrize("keys", [None, {"ACTIVE_VERSION": 1, "KEYS": {1: "A" * 43 + "="}}],
                         ids=["encryption-off", "encryption-on"])
def test_a_plaintext_encrypt_job_runs_with_one_warning(redis_db, worker_factory, keys):
    extra = {**FAST, **({"ENCRYPTION": keys} if keys else {})}
    for order in (1, 2):
        _push_ruby(redis_db, "tests.encryption.jobs.ChargeCard", [order, {"number": SECRET}], encrypt=True)
    worker = worker_factory("-c", "1", env={"WURK_TEST_EXTRA": json.dumps(extra)})
    wait_for(lambda: redis_db.llen("test:charged") == 2, timeout=60, message="both jobs to run")
    assert redis_db.zcard("dead") == 0 and redis_db.zcard("retry") == 0
    assert worker.stop() == 0
    log = worker.output()
    assert log.count("arrived unencrypted") == 1  # once per class and process, not per job
    assert SECRET not in log


@pytest.mark.django_db
def test_the_batch_page_masks_a_plaintext_encrypt_argument(client, redis_db):
    from tests.batch.conftest import run_jobs
    from tests.jobsapp.batch_jobs import AlwaysFails
    from wurk_django.batch import Batch

    batch = Batch()
    with batch.jobs():
        AlwaysFails.perform_async("x")
    # As a Ruby pusher with encryption off writes it: flagged, but in plain text.
    raw = payload.loads(redis_db.rpop("queue:default"))
    raw.update(encrypt=True, args=[{"number": SECRET}])
    redis_db.lpush("queue:default", payload.dumps(raw))
    run_jobs(redis_db)
    assert redis_db.zcard("dead") == 1  # retry 0: straight to the dead set, listed on the batch page
    client.force_login(make_user("admin", superuser=True))
    body = client.get(BASE + f"batches/{batch.bid}/").content.decode()
    assert SECRET not in body
    assert "[hidden: stored unencrypted]" in body
