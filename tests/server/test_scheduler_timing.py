"""When the scheduled poller sweeps (issue 19, goal 2; RUN-140, CORE-148).

The poller sleeps its usual interval unless something is due sooner: it then
sleeps until the earliest score of ``retry``/``schedule``, and a push into
those sets (published by the Writer) cuts a longer sleep short. The timing
logic runs on clocks the tests control; no assertion is about elapsed time.
"""

from __future__ import annotations

import threading

import pytest
import redis

from tests.support import wait_for
from wurk_django import keys
from wurk_django.client.push import Client
from wurk_django.client.writer import Writer
from wurk_django.conf import Config
from wurk_django.server import scheduler as scheduler_module
from wurk_django.server.scheduler import MIN_GAP, Scheduler, plan_wait


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("now,usual,due,since,jitter,expected", [
    (100.0, 5.0, None, 3.0, 0.0, 5.0),  # nothing scheduled: the usual interval
    (100.0, 5.0, 110.0, 3.0, 0.0, 5.0),  # due after the usual sweep: the usual interval
    (100.0, 5.0, 102.5, 3.0, 0.0, 2.5),  # due sooner: sleep until then
    (100.0, 5.0, 102.5, 3.0, 0.1, 2.6),  # plus this process's jitter
    (100.0, 5.0, 99.0, 3.0, 0.0, 0.0),  # overdue, last sweep long ago: at once
    (100.0, 5.0, 100.0, 0.1, 0.0, MIN_GAP - 0.1),  # due now, but sweeps stay MIN_GAP apart
    (100.0, 0.3, 100.0, 0.0, 0.0, 0.3),  # a configured interval below MIN_GAP is kept
])
def test_plan_wait(now, usual, due, since, jitter, expected):
    assert plan_wait(now, usual, due, since, jitter) == pytest.approx(expected)


def _scheduler(clock: Clock, mono: Clock, **settings) -> Scheduler:
    return Scheduler(Config(AVERAGE_SCHEDULED_POLL_INTERVAL=600, **settings), clock=clock, monotonic=mono)


def test_after_a_sweep_it_sleeps_until_the_earliest_due_entry(redis_db):
    clock, mono = Clock(), Clock(50.0)
    sched = _scheduler(clock, mono)
    assert sched.interval() >= 300  # nothing scheduled: usual interval (600 x U + 300 for one process)
    redis_db.zadd("schedule", {"later": clock.now + 7.0})
    redis_db.zadd("retry", {"sooner": clock.now + 2.0})
    mono.now += 10  # the last sweep ended 10 s ago
    assert sched.interval() == pytest.approx(2.0)
    clock.now += 5  # the retry is overdue: at once
    assert sched.interval() == pytest.approx(0.0)


@pytest.mark.parametrize(("error", "warned"), [(ValueError("odd reply"), True),
                                              (redis.ConnectionError("down"), False)])
def test_a_failed_due_time_read_sleeps_the_usual_interval_and_says_why(redis_db, monkeypatch, caplog,
                                                                        error, warned):
    # An outage is the sweep's to report (one line per outage); anything else is logged here.
    sched = _scheduler(Clock(), Clock(50.0))

    def failing(*args, **kwargs):
        raise error

    monkeypatch.setattr(scheduler_module, "send_commands", failing)
    assert sched.interval() >= 300  # the usual interval: 600 x U + 300 for one process
    said = [r.getMessage() for r in caplog.records if "earliest due time" in r.getMessage()]
    assert said == (["scheduler: could not read the earliest due time (ValueError: odd reply); "
                     "sleeping the usual interval"] if warned else [])


def test_the_sweep_gap_holds_right_after_a_sweep(redis_db):
    clock, mono = Clock(), Clock(50.0)
    sched = _scheduler(clock, mono)
    redis_db.zadd("schedule", {"due": clock.now - 1})
    sched._swept_at = mono.now  # a sweep just ended and left something due (stopped early)
    assert sched.interval() == pytest.approx(MIN_GAP)


def test_a_published_earlier_entry_cuts_the_sleep_short(redis_db):
    # The fake monotonic clock starts at the real one: the loop's own deadline is set from
    # time.monotonic(), and a fixed 50.0 made "later" look "sooner" once the machine had
    # been up for more than ~2.6 hours.
    clock, mono = Clock(), Clock(__import__("time").monotonic())
    sched = _scheduler(clock, mono)
    mono.now += 10
    assert not sched.heard(clock.now + 1)  # not sleeping: nothing to cut short
    sleeper = threading.Thread(target=sched.loop._wait, args=(600,), daemon=True)
    sleeper.start()
    wait_for(lambda: sched.loop._deadline is not None, message="the loop to sleep")
    # Later than the current deadline: ignored.
    assert not sched.heard(clock.now + 10_000)
    # Sooner: the sleep now ends at (real monotonic now) + 0, so the sleeper returns.
    sched._monotonic = __import__("time").monotonic
    sched._swept_at = -1e9
    assert sched.heard(clock.now)
    sleeper.join(30)
    assert not sleeper.is_alive()
    sched.terminate()


def test_the_writer_publishes_the_earliest_scheduled_score(redis_db):
    pubsub = redis_db.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(_channel(redis_db))
    try:
        wait_for(lambda: pubsub.get_message(timeout=0.1) is None or True)
        Client().push({"class": "X", "args": [], "at": 2_000_000_005.5})
        Client().push_bulk({"class": "X", "args": [[1], [2]], "at": 2_000_000_001.25})
        Writer().add_to_set("retry", [({"class": "X", "args": [], "jid": "r" * 24, "queue": "q"}, 2_000_000_009.0)])
        Writer().add_to_set("dead", [({"class": "X", "args": [], "jid": "d" * 24, "queue": "q"}, 1.0)])  # not due
        heard = []
        wait_for(lambda: heard.extend(_drain(pubsub)) or len(heard) >= 3, message="three wake-ups")
        assert [float(m) for m in heard] == [2_000_000_005.5, 2_000_000_001.25, 2_000_000_009.0]
        assert not _drain(pubsub)
    finally:
        pubsub.close()


def _drain(pubsub) -> list[bytes]:
    out = []
    while (message := pubsub.get_message(timeout=0.2)) is not None:
        if message.get("type") == "message":
            out.append(message["data"])
    return out


def test_a_started_scheduler_moves_a_job_pushed_during_its_first_wait(redis_db, monkeypatch):
    """The first sweep is 10-15 s after start; a job scheduled for now + 0.3 s is moved when
    due, because the listener heard its push (wait_for gives up before the first sweep)."""
    monkeypatch.setattr(scheduler_module, "INITIAL_WAIT", 30)
    sched = Scheduler(Config(AVERAGE_SCHEDULED_POLL_INTERVAL=600))
    sched.start()
    try:
        wait_for(lambda: _subscribed(redis_db), message="the listener to subscribe")
        import time

        jid = Client().push({"class": "tests.jobsapp.jobs.RecordJob", "args": [1], "at": time.time() + 0.3})
        wait_for(lambda: redis_db.llen("queue:default") == 1, timeout=20, message="the due job to be moved")
        assert jid.encode() in redis_db.lindex("queue:default", 0)
        assert redis_db.zcard("schedule") == 0
    finally:
        sched.terminate()
        sched.loop.join()


def _channel(redis_db) -> str:
    return keys.schedule_wake_channel(redis_db.connection_pool.connection_kwargs.get("db", 0))


def _subscribed(redis_db) -> bool:
    return redis_db.pubsub_numsub(_channel(redis_db))[0][1] >= 1
