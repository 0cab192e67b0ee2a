"""Construction: validation, options JSON as Ruby writes it, registration, the bounded
name list, rebuilding from metadata (ENT-101..112, ENT-129, ENT-142)."""

from __future__ import annotations

import hashlib

import pytest

from wurk_django import canonical, limiter
from wurk_django.limiter import listing


@pytest.mark.parametrize("make, named", [
    (lambda: limiter.concurrent("bad name", 3), "'bad name'"),
    (lambda: limiter.concurrent("a\n", 3), "'a\\n'"),  # $-style matching would let a trailing newline in
    (lambda: limiter.concurrent("é", 3), "'é'"),  # ASCII word characters only (ENT-103)
    (lambda: limiter.concurrent("erp", 0), "0"),
    (lambda: limiter.concurrent("erp", 2.5), "2.5"),
    (lambda: limiter.concurrent("erp", True), "True"),
    (lambda: limiter.concurrent("erp", 3, wait_timeout=-1), "-1"),
    (lambda: limiter.concurrent("erp", 3, lock_timeout=0), "0"),
    (lambda: limiter.concurrent("erp", 3, policy="wait"), "'wait'"),
    (lambda: limiter.concurrent("erp", 3, backoff=30), "30"),
    (lambda: limiter.concurrent("erp", 3, ttl=3600), "3600"),  # ENT-102: at least a day
    (lambda: limiter.concurrent("erp", 3, reschedule=-1), "-1"),
    (lambda: limiter.concurrent("erp", 3, colour="red"), "'colour'"),
    (lambda: limiter.bucket("b", 10, 60), "60"),  # ENT-102: a bucket needs a unit
    (lambda: limiter.bucket("b", 10, "fortnight"), "'fortnight'"),
    (lambda: limiter.window("w", 10, 0), "0"),
    (lambda: limiter.window("w", 10, "week"), "'week'"),
    (lambda: limiter.leaky("l", 0, "minute"), "0"),
    (lambda: limiter.leaky("l", 10, -5), "-5"),
    (lambda: limiter.points("p", 0, 1), "0"),
    (lambda: limiter.points("p", 100, -1), "-1"),
    (lambda: limiter.points("p", 100, 1, policy="ignore"), "'policy'"),
])
def test_bad_arguments_raise_value_error_naming_the_value(make, named, redis_db):
    with pytest.raises(ValueError) as info:
        make()
    assert named in str(info.value)
    assert not redis_db.keys("lmtr*")  # nothing registered for a refused limiter


def test_window_takes_seconds_and_leaky_takes_seconds_or_units(redis_db):
    assert limiter.window("w", 5, 30).interval == 30
    assert limiter.leaky("l", 60, "minute").drain_per_sec == 1.0
    assert limiter.leaky("l2", 10, 5).drain_per_sec == 2.0


# ENT-111: byte-for-byte the JSON Ruby wurk writes for default-configured limiters.
@pytest.mark.parametrize("make, text", [
    (lambda: limiter.concurrent("erp", 3),
     '{"limit":3,"wait_timeout":5,"lock_timeout":30,"policy":"raise","backoff":null,"ttl":7776000}'),
    (lambda: limiter.bucket("mailgun", 10, "second"),
     '{"count":10,"interval":"second","wait_timeout":5,"backoff":null,"ttl":7776000,"reschedule":20}'),
    (lambda: limiter.window("stripe", 100, "second"),
     '{"count":100,"interval":"second","wait_timeout":5,"backoff":null,"ttl":7776000,"reschedule":20}'),
    (lambda: limiter.window("w30", 100, 30),
     '{"count":100,"interval":30,"wait_timeout":5,"backoff":null,"ttl":7776000,"reschedule":20}'),
    (lambda: limiter.leaky("drip", 60, "minute"),
     '{"bucket_size":60,"drain":"minute","wait_timeout":5,"backoff":null,"ttl":7776000}'),
    (lambda: limiter.points("graphql", 1000, 50),
     '{"initial":1000,"refill":50,"backoff":null,"ttl":7776000}'),
    # Port-only options are appended, and only when not at their default (ENT-104/105).
    (lambda: limiter.window("skip", 1, "minute", policy="skip", backoff=lambda *a: 1),
     '{"count":1,"interval":"minute","wait_timeout":5,"backoff":"<proc>","ttl":7776000,"reschedule":20,'
     '"policy":"skip"}'),
    (lambda: limiter.concurrent("c0", 1, reschedule=0, wait_timeout=0.5),
     '{"limit":1,"wait_timeout":0.5,"lock_timeout":30,"policy":"raise","backoff":null,"ttl":7776000,"reschedule":0}'),
])
def test_options_json_and_fingerprint_match_ruby(make, text, redis_db):
    lim = make()
    assert not redis_db.exists(f"lmtr:{lim.name}")  # defined: nothing written yet (issue 45 item 4)
    lim.register()  # what its first use does
    assert lim.options_json == text
    assert lim.fingerprint == hashlib.sha256(f"{lim.type}|{lim.name}|{text}".encode()).hexdigest()
    meta = redis_db.hgetall(f"lmtr:{lim.name}")
    assert meta == {b"type": lim.type.encode(), b"options": text.encode(), b"fingerprint": lim.fingerprint.encode()}
    assert 86400 * 89 < redis_db.ttl(f"lmtr:{lim.name}") <= 7776000
    assert redis_db.sismember("lmtr-list", lim.name)


@pytest.mark.parametrize("value, ruby", [(0.5, "0.5"), (1.0, "1.0"), (1e-05, "1.0e-05"), (1.5e-05, "1.5e-05"),
                                         (1e16, "1.0e+16"), (123456.789, "123456.789"), (2.5e20, "2.5e+20"),
                                         (1e15, "1.0e+15"), (1000000000000000.5, "1000000000000000.5")])
def test_floats_are_written_as_ruby_writes_them(value, ruby):  # ENT-004
    assert canonical.ruby_float(value) == ruby
    lim = limiter.points("p", 10, value, register=False)
    assert lim.options_json == f'{{"initial":10,"refill":{ruby},"backoff":null,"ttl":7776000}}'


def test_infinite_and_nan_are_refused():
    for bad in (float("inf"), float("nan")):
        with pytest.raises(ValueError, match="wait_timeout"):
            limiter.window("w", 1, "second", wait_timeout=bad, register=False)


def test_registration_adds_to_the_list_only_when_metadata_is_new(redis_db):  # ENT-111
    lim = limiter.concurrent("erp", 3)
    assert lim.register() == 1
    assert lim.register() == 0  # metadata already there: the list is not touched
    redis_db.srem("lmtr-list", "erp")
    assert lim.register() == 0  # still not re-added while the metadata lives
    redis_db.delete("lmtr:erp")  # metadata expired
    assert lim.register() == 1
    assert redis_db.sismember("lmtr-list", "erp")


def test_register_false_writes_nothing(redis_db):
    limiter.concurrent("quiet", 3, register=False)
    assert not redis_db.keys("*")


def test_per_user_names_keep_the_list_bounded(redis_db):  # ENT-112
    for user_id in range(250):
        limiter.window(f"stripe-{user_id}", 10, "second").register()
    assert redis_db.scard("lmtr-list") == 250
    for user_id in range(240):
        redis_db.delete(f"lmtr:stripe-{user_id}")  # their metadata expired
    assert listing.names() == [f"stripe-{i}" for i in range(240, 250)]
    assert redis_db.scard("lmtr-list") == 10


def test_sweep_script_keeps_a_name_registered_again_meanwhile(redis_db):
    from wurk_django.limiter.base import run

    lim = limiter.concurrent("raced", 1)
    lim.register()
    # The dashboard probed EXISTS and saw nothing; before its sweep, the name came back.
    assert run("list_sweep", ["lmtr-list", "lmtr:raced"], ["raced"]) == 0
    redis_db.delete("lmtr:raced")
    assert run("list_sweep", ["lmtr-list", "lmtr:raced"], ["raced"]) == 1
    assert lim.register() == 1


def test_build_from_metadata_has_no_side_effects(redis_db):  # ENT-142
    made = limiter.bucket("mailgun", 10, "minute", backoff=lambda *a: 5)
    made.register()
    meta = listing.metadata("mailgun")
    redis_db.delete("lmtr:mailgun", "lmtr-list")
    rebuilt = limiter.build("mailgun", meta["type"], meta["options"])
    assert isinstance(rebuilt, limiter.Bucket)
    assert (rebuilt.count, rebuilt.interval, rebuilt.options["backoff"]) == (10, 60, None)
    assert not redis_db.keys("*")
    assert made.type == rebuilt.type == "bucket"
    assert limiter.build("x", "nonsense", "{}") is None
    assert limiter.build("x", "window", '{"count":0,"interval":"second"}') is None
    # Options a newer version wrote are ignored rather than breaking the dashboard.
    assert limiter.build("x", "points", '{"initial":5,"refill":1,"ttl":86400,"future":1}').initial == 5


def test_unlimited_always_runs_and_touches_no_redis(redis_db):  # ENT-129
    free = limiter.unlimited("anything", 5, wait_timeout=1)
    assert free.within_limit(lambda a, b=0: a + b, 1, b=2, used=3, estimate=4) == 3
    with free.acquire(estimate=10) as held:
        assert held.acquired and held.points_used(3) is None
    assert free.status() == {"used": 0, "limit": None, "reset_at": None, "available": True}
    assert free.name == "unlimited" and free.size == 0
    assert free.fingerprint == hashlib.sha256(b"unlimited").hexdigest()
    assert not redis_db.keys("*")


def test_limiter_used_while_redis_is_down_registers_at_the_next_use(monkeypatch, caplog, redis_db):
    from wurk_django.limiter import base

    def down(*_a, **_k):
        raise ConnectionError("redis is not there")

    with monkeypatch.context() as patched:
        patched.setattr(base, "run", down)
        lim = limiter.concurrent("early", 2)  # defining it does not even try (issue 45 item 4)
        assert lim.limit == 2 and lim.unregistered and not caplog.text
        # The first use tries; registration only feeds the dashboard, so the call goes on.
        assert lim.within_limit(lambda: 7) == 7
    assert "could not register limiter 'early'" in caplog.text
    assert lim.unregistered and not redis_db.exists("lmtr:early")
    lim.within_limit(lambda: None)  # Redis is back: the next use registers it
    assert not lim.unregistered
    assert redis_db.sismember("lmtr-list", "early")


@pytest.mark.parametrize("make", [
    lambda n: limiter.concurrent("r-concurrent", 1, reschedule=n),
    lambda n: limiter.bucket("r-bucket", 1, "second", reschedule=n),
    lambda n: limiter.window("r-window", 1, "second", reschedule=n),
    lambda n: limiter.leaky("r-leaky", 1, "second", reschedule=n),
    lambda n: limiter.points("r-points", 10, 1, reschedule=n),
])
def test_every_type_takes_reschedule_and_the_middleware_uses_it(make):
    """ENT-105: ``reschedule`` is accepted on all five types and is the cap the limiter
    middleware reschedules a job up to (0: an ordinary failure at once)."""
    from wurk_django.limiter.middleware import cap_of

    assert cap_of(make(7)) == 7 and cap_of(make(0)) == 0
    with pytest.raises(ValueError, match="-1"):
        make(-1)
