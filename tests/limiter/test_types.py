"""Each limiter type on a real Redis, its clock driven by the test where time matters
(ENT-120..128, ENT-140..142). The scripts take "now" from a preceding Redis TIME,
advanced by the test, instead of sleeping."""

from __future__ import annotations

import threading
import time

import pytest

from wurk_django import limiter

from .conftest import driven


def boom():
    raise AssertionError("must not run")


# -- concurrent ------------------------------------------------------------------------


def test_concurrent_holds_at_most_limit_and_releases(redis_db):
    erp = limiter.concurrent("erp", 2, wait_timeout=0)
    with erp.acquire() as one, erp.acquire() as two:
        assert one.acquired and two.acquired
        assert redis_db.zcard("lmtr-cs:erp") == 2
        with pytest.raises(limiter.OverLimit) as info:  # wait_timeout=0 fails at once (ENT-122)
            erp.within_limit(boom)
        assert str(info.value) == "limit 'erp' (concurrent) reached"
        assert info.value.limiter is erp
    assert redis_db.zcard("lmtr-cs:erp") == 0
    assert erp.within_limit(lambda x, y=1: x * y, 21, y=2) == 42
    stats = erp.status()
    assert (stats["held"], stats["immediate"], stats["waited"], stats["overages"]) == (3, 3, 0, 0)
    assert stats["used"] == 0 and stats["limit"] == 2 and stats["available"] and stats["reset_at"] is None


def test_concurrent_slot_expiry_is_an_int_epoch_lock_timeout_ahead(redis_db):  # ENT-110, ENT-120
    erp = limiter.concurrent("erp", 2, lock_timeout=30)
    with erp.acquire() as held:
        (member, score), = redis_db.zrange("lmtr-cs:erp", 0, -1, withscores=True)
        assert member.decode() == held.slot and len(held.slot) == 16
        assert score == int(score) and 29 <= score - time.time() <= 31
        assert erp.status()["reset_at"] == score


def test_concurrent_waits_for_a_slot_then_counts_the_wait(redis_db):
    erp = limiter.concurrent("erp", 1, wait_timeout=3)
    entered = threading.Event()

    def hold():
        with erp.acquire():
            entered.set()
            time.sleep(0.3)

    thread = threading.Thread(target=hold)
    thread.start()
    entered.wait(2)
    started = time.monotonic()
    assert erp.within_limit(lambda: "ran") == "ran"
    assert time.monotonic() - started >= 0.2  # it really waited for the holder
    thread.join()
    stats = erp.status()
    assert (stats["held"], stats["immediate"], stats["waited"], stats["overages"]) == (2, 1, 1, 0)


def test_concurrent_ignore_policy_skips_without_raising(redis_db):  # ENT-104; ENT-106: None, held.acquired
    erp = limiter.concurrent("erp", 1, wait_timeout=5, policy="ignore")
    with erp.acquire() as first:
        started = time.monotonic()
        assert erp.within_limit(boom) is None
        with erp.acquire() as second:
            assert not second.acquired
        assert time.monotonic() - started < 1  # ignore does not wait out wait_timeout
        assert first.acquired
    assert redis_db.zcard("lmtr-cs:erp") == 0


def test_concurrent_reclaims_an_expired_slot_and_counts_the_overage_on_release(redis_db, clock):
    erp = driven(limiter.concurrent("erp", 1, wait_timeout=0, lock_timeout=5), clock)
    slow = erp.acquire()
    slow.__enter__()  # a holder that will outrun lock_timeout
    with pytest.raises(limiter.OverLimit):
        erp.within_limit(boom)
    clock.advance(6)
    assert erp.within_limit(lambda: "got the reclaimed slot") == "got the reclaimed slot"
    slow.__exit__(None, None, None)  # its slot is gone: an overage (ENT-121)
    stats = erp.status()
    assert (stats["reclaimed"], stats["overages"], stats["held"]) == (1, 1, 2)


def test_running_out_of_wait_is_not_an_overage(redis_db):  # ENT-121 [SEED-0]
    erp = limiter.concurrent("erp", 1, wait_timeout=0.1)
    with erp.acquire(), pytest.raises(limiter.OverLimit):
        erp.within_limit(boom)
    assert erp.status()["overages"] == 0


def test_the_block_is_not_bounded_by_the_wait_and_errors_still_release(redis_db):  # ENT-106: the wait bounds the acquire only
    erp = limiter.concurrent("erp", 1, wait_timeout=0.05)
    assert erp.within_limit(time.sleep, 0.2) is None
    with pytest.raises(KeyError):
        erp.within_limit(lambda: {}["missing"])
    assert redis_db.zcard("lmtr-cs:erp") == 0
    assert erp.status()["held_time"] == 0  # whole seconds only


def test_a_failed_release_does_not_fail_the_call_that_already_ran(redis_db, monkeypatch, caplog):
    from wurk_django.limiter import concurrent_limiter as module

    erp = limiter.concurrent("erp", 1, lock_timeout=5)

    def down(*_a, **_k):
        raise ConnectionError("redis went away")

    monkeypatch.setattr(module, "send", down)
    assert erp.within_limit(lambda: "charged once") == "charged once"
    assert "could not release limiter 'erp'" in caplog.text
    assert redis_db.zcard("lmtr-cs:erp") == 1  # left for lock_timeout to reclaim


# -- bucket ----------------------------------------------------------------------------


def test_bucket_counts_per_calendar_period(redis_db, clock):
    mails = driven(limiter.bucket("mailgun", 3, "minute", wait_timeout=0), clock)
    epoch = int(clock.now // 60) + 1
    clock.at(epoch * 60 + 1)  # one second into a fresh minute
    for _ in range(3):
        mails.within_limit(lambda: None)
    with pytest.raises(limiter.OverLimit):
        mails.within_limit(boom)
    assert redis_db.get(f"lmtr-b:mailgun:{epoch}") == b"3"
    assert 0 < redis_db.ttl(f"lmtr-b:mailgun:{epoch}") <= 120  # two intervals (ENT-110)
    status = mails.status()
    assert status == {"used": 3, "limit": 3, "reset_at": float((epoch + 1) * 60), "available": False}
    clock.at((epoch + 1) * 60)  # the top of the next minute
    assert mails.within_limit(lambda: "new period") == "new period"
    assert mails.status()["used"] == 1


def test_bucket_used_is_all_or_nothing(redis_db, clock):  # ENT-106: used=, all or nothing
    mails = driven(limiter.bucket("mailgun", 3, "hour", wait_timeout=0), clock)
    mails.within_limit(lambda: None, used=2)
    with pytest.raises(limiter.OverLimit):
        mails.within_limit(boom, used=2)
    assert mails.size == 2
    mails.within_limit(lambda: None, used=1)
    with pytest.raises(ValueError, match="used=4"):
        mails.within_limit(boom, used=4)
    with pytest.raises(ValueError, match="used must be"):
        mails.within_limit(boom, used=0)


def test_bucket_waits_toward_the_next_second(redis_db):  # ENT-123 [SEED-0]: sleeps to the boundary
    per_second = limiter.bucket("ps", 1, "second", wait_timeout=2)
    per_second.within_limit(lambda: None)
    started = time.monotonic()
    per_second.within_limit(lambda: None)
    assert time.monotonic() - started < 1.2  # admitted in the next second, not after a whole extra one


# -- window ----------------------------------------------------------------------------


def test_window_slides_from_each_call(redis_db, clock):  # ENT-124
    stripe = driven(limiter.window("stripe", 3, 10, wait_timeout=0), clock)
    start = clock.now
    for step in range(3):
        stripe.within_limit(lambda: None)
        clock.advance(2)
    with pytest.raises(limiter.OverLimit):
        stripe.within_limit(boom)  # 6 s in: all three still inside the 10 s window
    status = stripe.status()
    assert status["used"] == 3 and not status["available"]
    assert status["reset_at"] == pytest.approx(start + 10, abs=1e-3)
    clock.at(start + 10.01)  # the first call left the window; the other two have not
    stripe.within_limit(lambda: None)
    with pytest.raises(limiter.OverLimit):
        stripe.within_limit(boom)


def test_window_trims_with_the_clocks_full_precision(redis_db, clock):  # ENT-124
    """The trim bound is written with every digit of the clock: Lua's own number-to-text
    keeps 14 significant digits (a tenth of a millisecond at today's epoch), and a bound
    rounded up past a call still inside the window let a sixth call into a window of five
    (tests/limiter/test_processes.py saw it when a waiting call retried right at the edge)."""
    one = driven(limiter.window("edge", 1, 1, wait_timeout=0), clock)
    admitted = float(int(clock.now)) + 0.12347  # 14 digits would round its bound up to .1235
    clock.at(admitted)
    one.within_limit(lambda: None)
    clock.at(admitted + 1 - 0.00001)  # 10 us before that call leaves the window
    with pytest.raises(limiter.OverLimit):
        one.within_limit(boom)
    clock.at(admitted + 1 + 0.00001)
    one.within_limit(lambda: None)
    assert redis_db.zcard("lmtr-w:edge") == 1


def test_window_status_never_trims(redis_db, clock):  # ENT-125 [SEED-0]
    stripe = driven(limiter.window("stripe", 3, 10, wait_timeout=0), clock)
    stripe.within_limit(lambda: None, used=3)
    clock.advance(60)
    assert stripe.status() == {"used": 0, "limit": 3, "reset_at": None, "available": True}
    assert redis_db.zcard("lmtr-w:stripe") == 3  # reading left the entries alone
    stripe.within_limit(lambda: None)  # only an acquire trims
    assert redis_db.zcard("lmtr-w:stripe") == 1


def test_window_policy_skip_returns_none(redis_db):
    stripe = limiter.window("stripe", 1, "minute", policy="skip")
    stripe.within_limit(lambda: None)
    assert stripe.within_limit(boom) is None


# -- leaky -----------------------------------------------------------------------------


def test_leaky_drains_steadily(redis_db, clock):  # ENT-126
    drip = driven(limiter.leaky("drip", 3, 3, wait_timeout=0), clock)  # one per second drains out
    for _ in range(3):
        drip.within_limit(lambda: None)
    with pytest.raises(limiter.OverLimit):
        drip.within_limit(boom)
    status = drip.status()
    assert status["used"] == 3 and not status["available"]
    assert status["reset_at"] == pytest.approx(clock.now + 1, abs=1e-3)
    clock.advance(0.5)
    with pytest.raises(limiter.OverLimit):
        drip.within_limit(boom)  # only half a unit has drained
    clock.advance(0.501)  # (a hair over: stored times keep microseconds only)
    drip.within_limit(lambda: None)
    clock.advance(2)
    assert drip.status()["used"] == pytest.approx(1, abs=0.01)
    drip.within_limit(lambda: None)
    drip.within_limit(lambda: None)
    with pytest.raises(limiter.OverLimit):
        drip.within_limit(boom)


# -- points ----------------------------------------------------------------------------


def test_points_spend_refill_and_refuse_at_once(redis_db, clock):  # ENT-127; ENT-106: estimate= required
    api = driven(limiter.points("graphql", 10, 1), clock)
    api.within_limit(lambda: None, estimate=4)
    api.within_limit(lambda: None, estimate=4)
    started = time.monotonic()
    with pytest.raises(limiter.OverLimit):
        api.within_limit(boom, estimate=4)  # balance 2: refused with no wait
    assert time.monotonic() - started < 0.5
    status = api.status()
    assert status["used"] == pytest.approx(8) and status["limit"] == 10
    assert status["reset_at"] == pytest.approx(clock.now + 8, abs=1e-3)
    clock.advance(2.001)  # (a hair over: stored times keep microseconds only)
    api.within_limit(lambda: None, estimate=4)
    clock.advance(100)
    assert api.status() == {"used": 0, "limit": 10.0, "reset_at": None, "available": True}
    with pytest.raises(ValueError, match="estimate"):
        api.within_limit(boom)
    with pytest.raises(ValueError, match="estimate=11"):
        api.within_limit(boom, estimate=11)


def test_points_settle_the_real_cost(redis_db, clock):  # ENT-128
    api = driven(limiter.points("graphql", 10, 0), clock)
    with api.acquire(estimate=6) as held:
        assert held.points_used(1) == 9.0  # 4 -> 9: five points came back
    with api.acquire(estimate=6) as held:
        assert held.points_used(20) == 0.0  # cost more than estimated: clamped at 0
    last = redis_db.hget("lmtr-p:graphql", "last")
    api.acquire(estimate=1).__enter__  # noqa: B018 - building the context touches nothing
    assert redis_db.hget("lmtr-p:graphql", "last") == last


# -- management ------------------------------------------------------------------------


@pytest.mark.parametrize("make, use, state", [
    (lambda: limiter.concurrent("m", 2), {}, ["lmtr-stats:m"]),
    (lambda: limiter.window("m", 2, 60), {}, ["lmtr-w:m"]),
    (lambda: limiter.leaky("m", 2, 60), {}, ["lmtr-l:m"]),
    (lambda: limiter.points("m", 5, 1), {"estimate": 1}, ["lmtr-p:m"]),
    (lambda: limiter.bucket("m", 2, "day"), {}, None),
])
def test_reset_keeps_metadata_and_delete_removes_everything(make, use, state, redis_db):  # ENT-142
    lim = make()
    lim.within_limit(lambda: None, **use)
    before = {k.decode() for k in redis_db.keys("lmtr*")}
    state = state or [k for k in before if k.startswith("lmtr-b:")]
    assert set(state) <= before
    lim.reset()
    assert {k.decode() for k in redis_db.keys("lmtr*")} == {"lmtr:m", "lmtr-list"}
    assert lim.status()["used"] == 0
    lim.within_limit(lambda: None, **use)
    lim.delete()
    assert not redis_db.keys("lmtr*")
