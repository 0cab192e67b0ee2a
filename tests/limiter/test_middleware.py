"""The server middleware's handling of OverLimit inside a job (ENT-150..153)."""

from __future__ import annotations

import time

import pytest

from tests.support import wurk_settings
from wurk_django import context, limiter, payload, signals
from wurk_django.conf import get_config
from wurk_django.limiter.middleware import LimiterMiddleware, default_backoff
from wurk_django.middleware import server_chain
from wurk_django.outcome import Outcome
from wurk_django.redis.connection import get_redis

RESCHEDULED, DEAD = Outcome.RESCHEDULED, Outcome.DEAD


class PartnerSaid429(Exception):
    pass


def a_job(**extra) -> dict:
    return {"class": "tests.limiter.jobs.Hammer", "args": [1], "queue": "default", "jid": payload.new_jid(),
            "retry": True, "created_at": payload.now_ms(), "enqueued_at": payload.now_ms(), **extra}


def run(job: dict, exc: BaseException, raw: bytes | None = None) -> Outcome | None:
    """The middleware around a job that raises ``exc``, as a worker runs it (``raw``: the
    bytes as fetched, by default the job itself); the outcome the middleware decided."""

    def call_next():
        raise exc

    config = get_config()
    where = context.JobContext(config, get_redis(config=config), payload.dumps(job) if raw is None else raw,
                               queue=job["queue"], job=job)
    with context.scope(where):
        assert LimiterMiddleware()(object(), job, job["queue"], call_next) is None
    return where.outcome


def scheduled(redis_db) -> list[tuple[dict, float]]:
    return [(payload.loads(raw), score) for raw, score in redis_db.zrange("schedule", 0, -1, withscores=True)]


def test_it_is_in_the_server_chain_outside_the_users_middleware():
    chain = server_chain(get_config())
    assert LimiterMiddleware in chain.entries


def test_over_limit_reschedules_the_same_job_with_backoff_and_acks(redis_db):  # ENT-151
    erp = limiter.concurrent("erp", 1, backoff=lambda lim, job, exc: 30 + job["overrated"])
    job = a_job(overrated=2)
    before = time.time()
    assert run(job, limiter.OverLimit(erp)) is RESCHEDULED
    (again, at), = scheduled(redis_db)
    assert again["jid"] == job["jid"] and again["args"] == [1] and again["overrated"] == 3
    assert "enqueued_at" not in again and "at" not in again
    assert before + 33 <= at <= time.time() + 33
    assert job["overrated"] == 3  # visible to outer middleware and error handlers
    assert not redis_db.zcard("retry") and not redis_db.zcard("dead")


def test_backoff_order_limiter_then_setting_then_default(redis_db):
    def slow(lim, job, exc):
        return 1000

    with wurk_settings(LIMITER_BACKOFF=slow):
        assert run(a_job(), limiter.OverLimit(limiter.window("w", 1, "second"))) is RESCHEDULED
        (_job, at), = scheduled(redis_db)
        assert 999 < at - time.time() <= 1000
    redis_db.delete("schedule")
    assert run(a_job(overrated=1), limiter.OverLimit(limiter.window("w", 1, "second"))) is RESCHEDULED
    (_job, at), = scheduled(redis_db)
    assert 600 < at - time.time() <= 900  # 300 x 2 + 1..300
    assert all(301 <= default_backoff(None, {"overrated": 1}, None) <= 600 for _ in range(50))


def test_an_exception_that_is_not_a_limit_passes_through(redis_db):
    with pytest.raises(KeyError):
        run(a_job(), KeyError("x"))
    assert not redis_db.zcard("schedule")


def test_configured_errors_are_rescheduled_with_the_default_cap(redis_db):  # ENT-152
    with wurk_settings(LIMITER_ERRORS=["tests.limiter.test_middleware.PartnerSaid429"],
                       LIMITER_BACKOFF=lambda lim, job, exc: 5):
        exc = PartnerSaid429("slow down")
        assert run(a_job(), exc) is RESCHEDULED
        assert exc.job["overrated"] == 1
        assert redis_db.zcard("schedule") == 1
        assert run(a_job(overrated=19), PartnerSaid429("again")) is DEAD  # the 20th time: the cap
    dead, = redis_db.zrange("dead", 0, -1)
    assert payload.loads(dead)["error_message"] == "rate_limited: again (overrated=20)"


def test_at_the_cap_the_job_goes_dead_with_the_reason(redis_db):  # ENT-153
    stripe = limiter.bucket("stripe", 1, "second", reschedule=3)
    job = a_job(overrated=2)
    seen = []

    def note(sender, **kwargs):
        seen.append((sender, kwargs["job"]["overrated"], kwargs["retry_at"]))

    signals.job_rate_limited.connect(note)
    died = []
    signals.job_died.connect(lambda sender, **kw: died.append(kw["job"]["jid"]), weak=False, dispatch_uid="lim")
    try:
        assert run(job, limiter.OverLimit(stripe)) is DEAD
        assert run(a_job(), limiter.OverLimit(stripe)) is RESCHEDULED  # a first time: rescheduled
    finally:
        signals.job_rate_limited.disconnect(note)
        signals.job_died.disconnect(dispatch_uid="lim")
    assert seen[0] == ("tests.limiter.jobs.Hammer", 3, None)
    assert seen[1][1] == 1 and seen[1][2] > time.time()
    assert died == [job["jid"]]  # death handlers and job_died ran
    redis_db.delete("schedule")
    assert not redis_db.zcard("schedule")
    dead = payload.loads(redis_db.zrange("dead", 0, -1)[0])
    assert dead["jid"] == job["jid"] and dead["overrated"] == 3
    assert dead["error_class"].endswith("OverLimit")
    assert dead["error_message"] == "rate_limited: limit 'stripe' (bucket) reached (overrated=3)"
    assert abs(dead["failed_at"] - time.time() * 1000) < 5000


def test_cap_action_retry_hands_the_error_to_the_retry_pipeline(redis_db):
    stripe = limiter.bucket("stripe", 1, "second", reschedule=3)
    with wurk_settings(LIMITER_CAP_ACTION="retry"), pytest.raises(limiter.OverLimit) as info:
        run(a_job(overrated=2), limiter.OverLimit(stripe))
    assert info.value.job["overrated"] == 3
    assert not redis_db.zcard("dead") and not redis_db.zcard("schedule")


def test_reschedule_zero_is_an_ordinary_failure(redis_db):  # ENT-151 step 4
    # ENT-105: with reschedule=0 an over-limit run is an ordinary failure.
    erp = limiter.concurrent("erp", 1, reschedule=0)
    with pytest.raises(limiter.OverLimit):
        run(a_job(), limiter.OverLimit(erp))
    assert not redis_db.zcard("schedule") and not redis_db.zcard("dead")


@pytest.mark.parametrize("value", [{"BAD": 1}, {"URL": "nope"}, {"POOL_SIZE": 0}])
def test_limiter_redis_setting_is_checked(value):
    from wurk_django.conf import problems

    assert [p.key for p in problems({"LIMITER_REDIS": value})] == ["LIMITER_REDIS"]


def test_a_dedicated_limiter_pool_is_used_when_configured(redis_db):
    from django.conf import settings

    from wurk_django.limiter import base

    with wurk_settings(LIMITER_REDIS={"URL": settings.WURK_TEST_REDIS_URL, "POOL_SIZE": 3}):
        client = base.redis_client()
        assert client.connection_pool.max_connections == 3
        assert base.redis_client() is client
        limiter.concurrent("pooled", 1).within_limit(lambda: None)
    assert redis_db.exists("lmtr:pooled")


def test_an_encrypted_job_stays_encrypted_when_rescheduled_and_when_it_dies(redis_db):  # ENT-151 step 7
    import base64

    from wurk_django import encryption
    from wurk_django.encryption import envelope

    secret = {"card": "4242424242424242"}
    encryption.disable()
    try:
        with wurk_settings(ENCRYPTION={"ACTIVE_VERSION": 1, "KEYS": {1: base64.b64encode(bytes(32)).decode()}}):
            stripe = limiter.window("stripe", 1, "second", reschedule=2)
            # As the limiter middleware sees it: the encryption middleware further out opened it.
            assert run(a_job(args=[7, secret], encrypt=True), limiter.OverLimit(stripe)) is RESCHEDULED
            # At the cap the dead entry is the job as fetched: the envelope, not the opened value.
            fetched = a_job(args=[8, encryption.encrypt(secret)], encrypt=True, overrated=1)
            opened = {**fetched, "args": [8, secret]}
            assert run(opened, limiter.OverLimit(stripe), raw=payload.dumps(fetched)) is DEAD
            stored = redis_db.zrange("schedule", 0, -1) + redis_db.zrange("dead", 0, -1)
            assert len(stored) == 2
            for raw in stored:
                assert b"4242424242424242" not in raw
                job = payload.loads(raw)
                assert envelope.is_envelope(job["args"][-1]) and job["args"][0] in (7, 8)
                assert encryption.decrypt(job["args"][-1]) == secret
    finally:
        encryption.disable()


def test_a_unique_job_keeps_its_lock_and_is_not_dropped_as_its_own_duplicate(redis_db):  # ENT-151 step 7
    from wurk_django.client.push import Client
    from wurk_django.unique import lock

    with wurk_settings(UNIQUE_JOBS=True):
        jid = Client().push({"class": "tests.limiter.jobs.Hammer", "args": [1], "queue": "default",
                             "unique_for": 300})
        job = payload.loads(redis_db.lrange("queue:default", 0, -1)[0])
        key = lock.lock_key(job)
        assert redis_db.get(key) == jid.encode()
        assert run(job, limiter.OverLimit(limiter.concurrent("erp", 1))) is RESCHEDULED
        (again, _at), = scheduled(redis_db)
        assert again["jid"] == jid and again["overrated"] == 1
        assert redis_db.get(key) == jid.encode()  # still held by the same job
