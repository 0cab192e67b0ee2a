"""What the reaper gives back and who hears of it (issue 31 item 4): the order of the
jobs a dead process fetched (RUN-142, PRO-141), the recovery callback (PRO-100,
PRO-151, PRO-153) and the pill's dead score (PRO-154). In-process reapers against
the test Redis; tests/server/test_recovery_processes.py kills real workers."""

from __future__ import annotations

import json

import pytest

from tests.server.fetch.test_reliable import _dead_pid, _dead_slots
from tests.support import wurk_settings
from wurk_django import payload, signals
from wurk_django.server import poison
from wurk_django.server.reaper import Reaper
from wurk_django.server.state import NONCE, hostname


def _job(name: str, enqueued_at: int, **extra) -> bytes:
    jid = name.ljust(24, "x")
    return payload.dumps({"retry": True, "queue": "default", "class": "tests.jobsapp.jobs.RecordJob",
                          "args": [name], "jid": jid, "created_at": enqueued_at, "enqueued_at": enqueued_at,
                          **extra})


@pytest.fixture
def heard():
    """The recovery callback set in code: the calls it got, as (job string, pill)."""
    calls: list[tuple[str, poison.Pill | None]] = []
    poison.super_fetch(lambda jobstr, pill: calls.append((jobstr, pill)))
    yield calls
    poison.super_fetch(None)


def test_jobs_fetched_ahead_go_back_in_queue_order_across_slots_RUN_142_PRO_141(redis_db):
    """Three threads fetched turn by turn from one queue (jobs 0..8, each slot's jobs in
    its own list) and each ran its oldest. The six never started go back to the fetch
    end in the order they were queued, ahead of what was still queued."""
    pid = _dead_pid()
    jobs = [_job(f"j{n}", 1_700_000_000_000 + n) for n in range(9)]
    # slot 0 fetched j0,j3,j6; slot 1 j1,j4,j7; slot 2 j2,j5,j8 (oldest first); each ran its oldest.
    _dead_slots(redis_db, pid, {slot: (jobs[slot::3], "*") for slot in range(3)})
    later = [_job(f"q{n}", 1_700_000_001_000 + n) for n in range(3)]
    for raw in later:
        redis_db.lpush("queue:default", raw)
    assert Reaper(["default"], grace=0).boot_sweep() == 9
    queue = redis_db.lrange("queue:default", 0, -1)
    fetch_order = queue[::-1]  # fetched from the right end
    innocent = [raw for raw in fetch_order if raw in jobs[3:]]
    assert innocent == jobs[3:]  # j3 .. j8, in the order they were queued
    # ... and all before the jobs that were waiting in the queue (the running ones are
    # spaced apart, tests/server/fetch/test_reliable.py, so one of them may lead).
    assert max(fetch_order.index(raw) for raw in jobs[3:]) < min(fetch_order.index(raw) for raw in later)
    for raw in jobs[3:]:
        assert not redis_db.exists("super_fetch:recovered:" + json.loads(raw)["jid"])
    for raw in jobs[:3]:  # the running ones are counted (and spaced, tests/server/fetch/test_reliable.py)
        assert redis_db.get("super_fetch:recovered:" + json.loads(raw)["jid"]) == b"1"


def test_one_slot_keeps_its_order_whatever_the_timestamps_say(redis_db):
    """Within one thread's list the fetch order is known exactly, and wins over
    ``enqueued_at`` (a job pushed to the front of its queue, say)."""
    pid = _dead_pid()
    jobs = [_job("r", 5), _job("a", 9), _job("b", 1), _job("c", 3)]  # r running, then a, b, c
    _dead_slots(redis_db, pid, {0: (jobs, "*")})
    assert Reaper(["default"], grace=0).boot_sweep() == 4
    fetch_order = redis_db.lrange("queue:default", 0, -1)[::-1]
    assert [raw for raw in fetch_order if raw != jobs[0]] == jobs[1:]


def test_a_list_a_hand_back_reordered_keeps_its_order_among_the_others(redis_db):
    """A thread whose job runs long hands the jobs it fetched ahead back to the fetch end
    (fair.py), in front of jobs queued before them that an earlier hand-back put there; a
    thread fetching next moves them in that order. Its list keeps that order, and the
    lists are merged by the ``enqueued_at`` of each one's next job (the order a real
    worker killed under load shows, tests/server/test_recovery_processes.py)."""
    pid = _dead_pid()
    jobs = {n: _job(f"h{n}", 1_700_000_000_000 + n) for n in range(1, 13)}
    # Slot 0 ran h1 and had fetched h6, h7 (handed back last), then h2, h3, h8; slot 1 ran
    # h4 and holds h5, h9, h10; slot 2 ran h11 and holds h12.
    _dead_slots(redis_db, pid, {0: ([jobs[n] for n in (1, 6, 7, 2, 3, 8)], "*"),
                                1: ([jobs[n] for n in (4, 5, 9, 10)], "*"),
                                2: ([jobs[n] for n in (11, 12)], "*")})
    assert Reaper(["default"], grace=0).boot_sweep() == 12
    fetch_order = redis_db.lrange("queue:default", 0, -1)[::-1]
    innocent = [raw for raw in fetch_order if raw not in (jobs[1], jobs[4], jobs[11])]
    assert innocent == [jobs[n] for n in (5, 6, 7, 2, 3, 8, 9, 10, 12)]


def test_the_recovery_callback_hears_every_job_given_back_PRO_100_PRO_151(redis_db, heard):
    pid = _dead_pid()
    jobs = [_job(f"k{n}", 100 + n) for n in range(3)]
    _dead_slots(redis_db, pid, {0: (jobs, "*")})
    received = []

    def receiver(sender, **kwargs):
        received.append(kwargs)

    signals.jobs_recovered.connect(receiver)
    try:
        assert Reaper(["default"], grace=0).boot_sweep() == 3
    finally:
        signals.jobs_recovered.disconnect(receiver)
    assert sorted(jobstr for jobstr, _ in heard) == sorted(raw.decode() for raw in jobs)
    assert all(pill is None for _, pill in heard)
    (event,) = received
    assert event["queue"] == "default" and event["count"] == 3
    assert sorted(event["jobs"]) == sorted(jobs)
    assert event["process"] == f"{hostname()}:{pid}:{NONCE}"
    assert event["classes"] == {"tests.jobsapp.jobs.RecordJob": 3}


def test_a_failing_callback_is_logged_and_recovery_goes_on(redis_db, caplog):
    def broken(jobstr, pill):
        raise RuntimeError("callback broke")

    pid = _dead_pid()
    jobs = [_job(f"e{n}", 100 + n) for n in range(3)]
    _dead_slots(redis_db, pid, {0: (jobs, "*")})
    with wurk_settings(RECOVERY_CALLBACK=broken):
        assert Reaper(["default"], grace=0).boot_sweep() == 3
    assert sorted(redis_db.lrange("queue:default", 0, -1)) == sorted(jobs)
    failures = [r for r in caplog.records if "recovery goes on" in r.getMessage()]
    assert len(failures) == 3 and all(r.exc_info and "callback broke" in str(r.exc_info[1]) for r in failures)


def test_the_setting_takes_a_dotted_path(redis_db):
    from tests.server import recovery_hooks

    recovery_hooks.CALLS.clear()
    pid = _dead_pid()
    _dead_slots(redis_db, pid, {0: ([_job("p", 1)], "*")})
    with wurk_settings(RECOVERY_CALLBACK="tests.server.recovery_hooks.remember"):
        assert Reaper(["default"], grace=0).boot_sweep() == 1
    assert recovery_hooks.CALLS == [(_job("p", 1).decode(), None)]


def test_a_poison_pill_reaches_the_callback_with_its_dead_score_PRO_153_PRO_154(redis_db, heard):
    raw = _job("pill", 1)
    redis_db.set("super_fetch:recovered:" + "pill".ljust(24, "x"), poison.RECOVERY_THRESHOLD - 1)
    pid = _dead_pid()
    _dead_slots(redis_db, pid, {0: ([raw], None)})  # no marker: counted, as Pro counts
    Reaper(["default"], grace=0).boot_sweep()
    redis_db.delete("super_fetch:reaper:paced:default")
    Reaper(["default"], grace=0).boot_sweep()  # a job suspected before goes back alone, once paced
    ((entry, score),) = redis_db.zrange("dead", 0, -1, withscores=True)
    assert json.loads(entry)["jid"] == "pill".ljust(24, "x")
    ((jobstr, pill),) = heard
    assert jobstr == raw.decode()
    assert isinstance(pill, poison.Pill)
    assert (pill.jid, pill.klass, pill.count, pill.queue) == ("pill".ljust(24, "x"), "tests.jobsapp.jobs.RecordJob",
                                                             poison.RECOVERY_THRESHOLD, "default")
    assert pill.job_string == raw.decode()
    assert pill.dead_score == score


def test_a_discarded_pill_has_no_dead_score(redis_db, heard):
    raw = _job("gone", 1, dead=False)
    pill = poison.bury_pill(poison.Pill("gone".ljust(24, "x"), "X", 3, "default", ""), raw)
    assert pill.dead_score is None and pill.job_string == raw.decode()
    assert redis_db.zcard("dead") == 0
    assert heard == [(raw.decode(), pill)]


def test_super_fetch_refuses_what_it_cannot_call():
    with pytest.raises(ValueError, match="super_fetch"):
        poison.super_fetch("not callable")
