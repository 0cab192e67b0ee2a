"""The poller's per-loop step and the claim-fire script (ENT-411..415), with a fake clock."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import pytest

from tests.support import queued
from wurk_django import periodic
from wurk_django.conf import Config
from wurk_django.periodic import registration
from wurk_django.periodic.poller import Poller
from wurk_django.redis.scripts import lua

JOB = "tests.jobsapp.jobs.RecordJob"
T0 = int(datetime(2025, 1, 6, 10, 0, tzinfo=UTC).timestamp())  # a Monday, on the minute


class FakeClock:
    def __init__(self, now: float) -> None:
        self.t = float(now)

    def now(self) -> float:
        return self.t

    def real_seconds(self, seconds: float) -> float:
        return seconds


class FakeLeader:
    def __init__(self, leads: bool = True) -> None:
        self.leads = leads

    def is_leader(self) -> bool:
        return self.leads


@pytest.fixture(autouse=True)
def _forget():
    registration.forget_code_registrations()
    yield
    registration.forget_code_registrations()


def poller(clock, leads=True) -> Poller:
    return Poller(Config(), leader=FakeLeader(leads), entries=[], clock=clock)


def history(redis_db, lid):
    return [json.loads(raw) for raw in redis_db.lrange(f"loop-history:{lid}", 0, -1)]


def test_claim_fire_script(redis_db):
    # ENT-413, step by step
    claim = lua("periodic/lua/claim_fire")
    key = "loops:abc"
    # nf present and equal to what the caller read: claimed, marks swapped
    redis_db.hset(key, mapping={"nf": "100", "lf": "40"})
    assert claim(redis_db, [key], ["100", "101", "160"]) == 1
    assert redis_db.hmget(key, "lf", "nf") == [b"101", b"160"]
    # the caller read a stale nf: refused, nothing written
    assert claim(redis_db, [key], ["100", "102", "160"]) == 0
    assert redis_db.hmget(key, "lf", "nf") == [b"101", b"160"]
    # byte compare: "160.0" is not "160"
    assert claim(redis_db, [key], ["160.0", "161", "220"]) == 0
    # exhausted: "" deletes nf
    assert claim(redis_db, [key], ["160", "161", ""]) == 1
    assert redis_db.hmget(key, "lf", "nf") == [b"161", None]
    # nf absent: a slot the last fire already reached is refused
    assert claim(redis_db, [key], ["150", "170", ""]) == 0
    assert claim(redis_db, [key], ["161", "170", ""]) == 0
    assert claim(redis_db, [key], ["200", "201", "260"]) == 1


def test_only_the_leader_fires(redis_db):
    # ENT-411: a tick returns unless leader
    loop = periodic.register("* * * * *", JOB, args=["x"])
    clock = FakeClock(T0 + 1)
    assert poller(clock, leads=False).tick() == []
    assert queued(redis_db) == []
    assert len(poller(clock).tick()) == 1
    assert redis_db.hget(f"loops:{loop.lid}", "lf") == str(T0 + 1).encode()


def test_each_slot_fires_once_per_minute_and_marks_advance(redis_db):
    # ENT-412: slot from lf/now-60, nf = next after now, history [now, jid]
    loop = periodic.register("* * * * *", JOB, args=["x"])
    clock = FakeClock(T0 + 1)
    p = poller(clock)
    jids = []
    for minute in range(3):
        clock.t = T0 + minute * 60 + 1
        jids += p.tick()
        jids += p.tick()  # a second tick in the same minute finds nothing due
    assert len(jids) == 3
    assert redis_db.hmget(f"loops:{loop.lid}", "lf", "nf") == [str(T0 + 121).encode(), str(T0 + 180).encode()]
    assert history(redis_db, loop.lid) == [[T0 + 121, jids[2]], [T0 + 61, jids[1]], [T0 + 1, jids[0]]]
    assert [job["jid"] for job in queued(redis_db)] == list(reversed(jids))


def test_two_leaders_in_the_same_tick_fire_once(redis_db):
    # ENT-308/ENT-412: after a handover two processes may both believe they lead
    periodic.register("* * * * *", JOB)
    clock = FakeClock(T0 + 1)
    a, b = poller(clock), poller(clock)
    # both read the marks before either claims: the claim decides
    fired = a.tick() + b.tick()
    assert len(fired) == 1
    clock.t += 60
    assert len(b.tick() + a.tick()) == 1
    assert len(queued(redis_db)) == 2


def test_two_leaders_racing_on_stale_reads(redis_db, monkeypatch):
    # Both processes read the same (absent) marks; only one claim wins
    loop = periodic.register("* * * * *", JOB)
    clock = FakeClock(T0 + 1)
    a, b = poller(clock), poller(clock)
    real_hmget = redis_db.__class__.hmget
    stale = [None, None]

    def hmget_stale(self, name, *fields):
        return stale if name == f"loops:{loop.lid}" else real_hmget(self, name, *fields)

    monkeypatch.setattr(redis_db.__class__, "hmget", hmget_stale)
    fired = [a.step(loop), b.step(loop)]
    assert sum(j is not None for j in fired) == 1


def test_a_paused_loop_does_not_fire(redis_db):
    # ENT-412 step 1
    loop = periodic.register("* * * * *", JOB)
    periodic.pause(loop.lid)
    clock = FakeClock(T0 + 1)
    assert poller(clock).tick() == []
    assert not redis_db.hexists(f"loops:{loop.lid}", "lf")
    periodic.unpause(loop.lid)
    assert len(poller(clock).tick()) == 1


def test_missed_ticks_are_not_back_filled_and_are_logged(redis_db, caplog):
    # ENT-412 step 4, ENT-415
    loop = periodic.register("*/5 * * * *", JOB)
    clock = FakeClock(T0 + 1)
    p = poller(clock)
    assert len(p.tick()) == 1  # 10:00
    clock.t = T0 + 3600 + 30  # an hour without a leader: twelve slots went by
    with caplog.at_level(logging.WARNING, logger="wurk_django.periodic"):
        assert len(p.tick()) == 1  # once, for the whole gap
    assert len(p.tick()) == 0
    message = [r.getMessage() for r in caplog.records if "missed tick" in r.getMessage()]
    assert message == [f"[cron] missed tick lid={loop.lid} klass={JOB} expected_at={T0 + 300} "
                       f"fired_at={T0 + 3630} drift={3330}s"]
    # the next slot is computed from now, not from the missed slot
    assert redis_db.hget(f"loops:{loop.lid}", "nf") == str(T0 + 3900).encode()


def test_a_new_loop_fires_on_its_first_tick_only_if_it_matched_in_the_last_minute(redis_db):
    # ENT-415
    periodic.register("0 * * * *", JOB)  # on the hour
    clock = FakeClock(T0 + 30)
    assert len(poller(clock).tick()) == 1
    redis_db.flushdb()
    periodic.register("0 * * * *", JOB)
    clock.t = T0 + 90
    assert poller(clock).tick() == []


def test_exhausted_schedule_removes_nf_and_goes_quiet(redis_db):
    # ENT-415: next_fire_at None removes nf and silences the loop
    loop = periodic.register("0 0 31 2 *", JOB)
    clock = FakeClock(T0 + 1)
    assert poller(clock).tick() == []
    # forge a due mark: it fires once, then nothing
    redis_db.hset(f"loops:{loop.lid}", "nf", str(T0))
    assert len(poller(clock).tick()) == 1
    assert redis_db.hget(f"loops:{loop.lid}", "nf") is None
    clock.t += 600
    assert poller(clock).tick() == []


def test_payload_overlays_loop_options_on_class_options(redis_db):
    # ENT-414: the class's normal payload, then queue/retry/args/other options from the loop
    periodic.register("* * * * *", "tests.jobsapp.jobs.FailingJob", queue="low", args=["m"], tags=["cron"],
                      label="nightly", paused=False, tz="Asia/Tokyo")
    poller(FakeClock(T0 + 1)).tick()
    [job] = queued(redis_db, "low")
    assert job["class"] == "tests.jobsapp.jobs.FailingJob"
    assert job["args"] == ["m"] and job["queue"] == "low" and job["tags"] == ["cron"]
    assert job["retry"] == 3  # the class's own option survives
    for key in ("tz", "label", "paused"):
        assert key not in job


def test_enqueue_failure_after_the_claim_loses_the_fire_and_logs(redis_db, caplog, monkeypatch):
    # ENT-412: never doubled
    loop = periodic.register("* * * * *", JOB)
    p = poller(FakeClock(T0 + 1))

    def broken(item):
        raise ConnectionError("redis went away")

    monkeypatch.setattr(p.client, "push", broken)
    assert p.tick() == []
    assert "this fire is lost" in caplog.text
    assert redis_db.hget(f"loops:{loop.lid}", "lf") == str(T0 + 1).encode()
    monkeypatch.undo()
    assert p.tick() == []  # the slot stays claimed


def test_redis_outage_is_one_warning_then_one_recovery_line_without_traceback(redis_db, caplog):
    # CORE-108: an outage across several ticks logs when it starts and when it ends
    import redis as redis_lib

    periodic.register("* * * * *", JOB)
    clock = FakeClock(T0 + 1)
    dead = redis_lib.Redis(host="127.0.0.1", port=1, socket_connect_timeout=0.2)
    p = Poller(Config(), leader=FakeLeader(), entries=[], clock=clock, redis=dead)
    caplog.set_level(logging.INFO, logger="wurk_django")
    for _ in range(3):
        p._guarded_tick()
        clock.t += 60
    p._redis = redis_db
    p._guarded_tick()
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 2, [r.getMessage() for r in warnings]
    assert "failed" in warnings[0].getMessage() and "recovered after" in warnings[1].getMessage()
    assert all(r.exc_info is None for r in caplog.records)
    assert redis_db.llen("queue:default") == 1  # the tick after the outage fired


def test_history_keeps_the_last_25(redis_db):
    # ENT-405
    loop = periodic.register("* * * * *", JOB)
    clock = FakeClock(T0 + 1)
    p = poller(clock)
    for minute in range(30):
        clock.t = T0 + 60 * minute + 1
        p.tick()
    entries = history(redis_db, loop.lid)
    assert len(entries) == 25 and entries[0][0] == T0 + 29 * 60 + 1


def test_fire_bypasses_the_gate_and_advances_marks(redis_db):
    # ENT-406
    loop = periodic.register("0 4 * * *", JOB)
    jid = periodic.fire(loop.lid, clock=lambda: T0 + 5)
    assert [job["jid"] for job in queued(redis_db)] == [jid]
    assert redis_db.hget(f"loops:{loop.lid}", "lf") == str(T0 + 5).encode()
    assert redis_db.hget(f"loops:{loop.lid}", "nf") == str(int(datetime(2025, 1, 7, 4, tzinfo=UTC).timestamp())).encode()
    assert history(redis_db, loop.lid) == [[T0 + 5, jid]]
    assert periodic.fire("0000000000000000") is None


def test_enqueue_now_leaves_marks_and_history(redis_db):
    # ENT-802
    loop = periodic.register("0 4 * * *", JOB)
    jid = periodic.enqueue_now(loop.lid)
    assert [job["jid"] for job in queued(redis_db)] == [jid]
    assert not redis_db.hexists(f"loops:{loop.lid}", "lf")
    assert not redis_db.exists(f"loop-history:{loop.lid}")


def test_loop_fires_in_its_zone(redis_db):
    # ENT-409: 04:00 Tokyo = 19:00 UTC
    periodic.register("0 4 * * *", JOB, tz="Asia/Tokyo")
    clock = FakeClock(datetime(2025, 1, 6, 18, 59, 30, tzinfo=UTC).timestamp())
    p = poller(clock)
    assert p.tick() == []
    clock.t += 31
    assert len(p.tick()) == 1


def test_poller_waits_land_just_after_the_minute():
    # ENT-411: ticks every 60 s, placed just after the minute turns
    p = poller(FakeClock(T0 + 42.5))
    assert p._next_wait() == pytest.approx(18.5)


def test_periodic_component_is_registered_at_position_20():
    from wurk_django import features
    from wurk_django.server import launcher

    features.install()
    assert launcher._components["periodic"][0] == 20


def test_test_clock_env():
    # test-only accelerated clock shared by worker processes
    from wurk_django.periodic.clock import Clock, from_env

    assert from_env({}) == Clock()
    clock = from_env({"WURK_TEST_CLOCK": "1000,20"})
    assert clock.real_seconds(60) == 3
    with pytest.raises(ValueError):
        from_env({"WURK_TEST_CLOCK": "soon"})
