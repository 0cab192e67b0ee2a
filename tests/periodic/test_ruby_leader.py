"""Periodic loops shared with Ruby wurk leaders (issue 26 item 2, ENT-412, ENT-413).

The hashes here are written the way Ruby wurk's ``Cron`` writes them (read from
its source): registration writes ``schedule``, ``klass``, ``options`` (JSON, in
registration order), ``tz`` ("" for none) and ``paused`` ("0"/"1"); a fire
pushes first, then ``HSET lf <now> nf <next slot>`` (integer seconds, ``""``
when the schedule is exhausted) without comparing anything, then ``LPUSH
loop-history [now, jid]``. Its push carries only ``class``, ``args``,
``queue`` (else "default") and ``retry`` (else true) from ``options``.
"""

from __future__ import annotations

import json

import pytest

from tests.periodic.test_poller import T0, FakeClock, poller
from tests.support import queued
from wurk_django import canonical, periodic
from wurk_django.periodic import registration
from wurk_django.periodic.loops import LoopSet, lid_for


@pytest.fixture(autouse=True)
def _forget():
    registration.forget_code_registrations()
    yield
    registration.forget_code_registrations()


def ruby_register(redis_db, schedule: str, klass: str, options: dict, tz: str = "") -> str:
    """What Ruby's ``Cron.persist`` writes for ``mgr.register(schedule, klass, **options)``."""
    lid = lid_for(schedule, klass, options)
    redis_db.sadd("periodic", lid)
    redis_db.hset(f"loops:{lid}", mapping={"schedule": schedule, "klass": klass, "tz": tz, "paused": "0",
                                           "options": canonical.dumps(options)})
    return lid


def ruby_fire(redis_db, lid: str, now: int, next_slot: int | None, jid: str = "r" * 24) -> None:
    """What Ruby's poller writes after its push: no compare, the marks as integer text."""
    redis_db.hset(f"loops:{lid}", mapping={"lf": str(now), "nf": "" if next_slot is None else str(next_slot)})
    redis_db.lpush(f"loop-history:{lid}", json.dumps([now, jid]))


def ruby_push(stored_options: str) -> dict:
    """The job fields a Ruby leader's push takes from a loop's stored options."""
    options = json.loads(stored_options)
    args = options.get("args")
    return {"args": args if isinstance(args, list) else ([] if args is None else [args]),
            "queue": options.get("queue") or "default", "retry": options.get("retry", True)}


def test_a_ruby_loop_fires_on_a_python_leader_and_leaves_marks_ruby_reads(redis_db):
    lid = ruby_register(redis_db, "* * * * *", "HardJob", {"queue": "mail", "args": [1], "retry": 2})
    assert poller(FakeClock(T0 + 1)).tick()
    [job] = queued(redis_db, "mail")
    assert (job["class"], job["args"], job["retry"]) == ("HardJob", [1], 2)
    # Ruby reads both marks with to_i: plain integer text, the next slot after now.
    assert redis_db.hmget(f"loops:{lid}", "lf", "nf") == [str(T0 + 1).encode(), str(T0 + 60).encode()]
    assert json.loads(redis_db.lindex(f"loop-history:{lid}", 0)) == [T0 + 1, job["jid"]]


def test_a_slot_a_ruby_leader_fired_does_not_fire_again_here(redis_db):
    lid = ruby_register(redis_db, "* * * * *", "HardJob", {"args": [1]})
    # Ruby's poller ticks at any second: it fired the T0 slot at T0+40, then lost the lead.
    ruby_fire(redis_db, lid, T0 + 40, T0 + 60)
    clock = FakeClock(T0 + 50)
    p = poller(clock)
    assert p.tick() == []  # we lead from T0+50: the T0 slot is done
    clock.t = T0 + 61
    assert len(p.tick()) == 1 and p.tick() == []
    assert len(queued(redis_db)) == 1


@pytest.mark.parametrize("marks", [
    [None, None],  # the loop had never fired when we read
    [str(T0 - 60 + 3).encode(), str(T0).encode()],  # we read the T0 slot as due
])
def test_our_claim_loses_to_a_ruby_fire_between_our_read_and_our_claim(redis_db, monkeypatch, marks):
    lid = ruby_register(redis_db, "* * * * *", "HardJob", {"args": [1]})
    if marks[1] is not None:
        redis_db.hset(f"loops:{lid}", mapping={"lf": marks[0], "nf": marks[1]})
    real_hmget = redis_db.__class__.hmget

    def read_then_ruby_fires(self, name, *fields):
        if name != f"loops:{lid}":
            return real_hmget(self, name, *fields)
        ruby_fire(redis_db, lid, T0 + 2, T0 + 60)  # Ruby writes right after our read
        return marks

    monkeypatch.setattr(redis_db.__class__, "hmget", read_then_ruby_fires)
    [loop] = list(LoopSet(redis_db))
    assert poller(FakeClock(T0 + 3)).step(loop) is None
    assert queued(redis_db) == []
    stored = redis_db.hgetall(f"loops:{lid}")  # Ruby's marks stand
    assert (stored[b"lf"], stored[b"nf"]) == (str(T0 + 2).encode(), str(T0 + 60).encode())


def test_ruby_marks_that_are_empty_or_not_integers_do_not_break_a_tick(redis_db, caplog):
    never = ruby_register(redis_db, "0 0 30 2 *", "HardJob", {"args": ["never"]})
    ruby_fire(redis_db, never, T0 - 3600, None)  # Ruby writes nf "" when its parser finds no next slot
    odd = ruby_register(redis_db, "* * * * *", "HardJob", {"args": ["odd"]})
    redis_db.hset(f"loops:{odd}", mapping={"lf": f"{T0 - 59}.0", "nf": f"{T0}.0"})
    fired = poller(FakeClock(T0 + 1)).tick()
    assert [job["args"] for job in queued(redis_db)] == [["odd"]] and len(fired) == 1
    assert redis_db.hget(f"loops:{odd}", "nf") == str(T0 + 60).encode()
    assert "failed this tick" not in caplog.text


def test_class_queue_and_retry_are_stored_where_a_ruby_leader_reads_them(redis_db):
    # add_numbers is @job(queue="functions", retry=2); FailingJob has retry = 3; neither loop names them.
    functions = periodic.register("* * * * *", "tests.jobsapp.jobs.add_numbers", args=[1, 2])
    failing = periodic.register("*/5 * * * *", "tests.jobsapp.jobs.FailingJob")
    plain = periodic.register("0 * * * *", "tests.jobsapp.jobs.RecordJob", queue="low")
    # The lid is the registration's, as before (and as Ruby computes it from the same registration).
    assert functions.lid == lid_for("* * * * *", "tests.jobsapp.jobs.add_numbers", {"args": [1, 2]})
    stored = {loop.lid: redis_db.hget(f"loops:{loop.lid}", "options").decode()
              for loop in (functions, failing, plain)}
    assert stored[functions.lid] == '{"args":[1,2],"queue":"functions","retry":2}'
    assert stored[failing.lid] == '{"retry":3}'
    assert stored[plain.lid] == '{"queue":"low"}'
    # A Ruby leader's fire now pushes what ours does.
    poller(FakeClock(T0 + 1)).tick()
    [ours] = queued(redis_db, "functions")
    assert ruby_push(stored[functions.lid]) == {k: ours[k] for k in ("args", "queue", "retry")}


def test_python_and_ruby_leaders_alternating_fire_each_slot_once(redis_db):
    lid = ruby_register(redis_db, "* * * * *", "HardJob", {"args": [1]})
    clock = FakeClock(T0 + 1)
    p = poller(clock)
    fires = []
    for minute in range(6):
        base = T0 + minute * 60
        if minute % 2:  # a Ruby leader this minute, ticking at second 30
            nf = redis_db.hget(f"loops:{lid}", "nf")
            if nf is not None and int(nf) <= base + 30:
                ruby_fire(redis_db, lid, base + 30, base + 60)
                fires.append(("ruby", base))
        else:
            clock.t = base + 1
            fires += [("python", base) for _ in p.tick()]
    assert fires == [("python", T0 + m * 60) if m % 2 == 0 else ("ruby", T0 + m * 60) for m in range(6)]
