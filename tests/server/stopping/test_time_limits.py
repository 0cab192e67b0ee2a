"""Time limits in a real worker process (issue 27 item 3): the soft limit raised in the job's
thread and catchable, uncaught it is a failure that retries; the hard limit abandons a
``while True: pass`` and a ``time.sleep(30)`` job's threads, books the jobs with the error,
and the worker goes on at full concurrency with nothing lost."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from tests.jobsapp.limit_jobs import AsyncHard, AsyncSoft, Pair, Sleeper, SoftCaught, SoftUncaught, Spin
from tests.support import wait_for
from wurk_django import job

pytestmark = pytest.mark.slow


def _recorded(redis_db) -> list[str]:
    return [item.decode() for item in redis_db.lrange("test:limits", 0, -1)]


def _set(redis_db, name: str) -> dict[str, dict]:
    return {job["jid"]: job for job in (json.loads(raw) for raw in redis_db.zrange(name, 0, -1))}


def test_soft_and_hard_limits_in_a_worker(redis_db, worker_factory):
    caught = SoftCaught.perform_async("caught")
    uncaught = SoftUncaught.perform_async("uncaught")
    spin = Spin.perform_async("spin")
    sleeper = Sleeper.perform_async("sleep30")
    short = Sleeper.set(time_limit=0.5).perform_async("sleep3", 3)
    async_soft = AsyncSoft.perform_async("asoft")
    async_hard = AsyncHard.perform_async("ahard")
    worker = worker_factory("-c", "2")

    wait_for(lambda: {spin, uncaught, async_soft, async_hard} <= set(_set(redis_db, "retry"))
             and {sleeper, short} <= set(_set(redis_db, "dead")),
             timeout=90, message="every limited job booked")
    recorded = _recorded(redis_db)
    assert "caught:cleaned" in recorded  # the soft limit was raised inside the job, which caught it
    assert not any(r.endswith(":not-interrupted") for r in recorded), recorded
    assert caught not in _set(redis_db, "retry") and caught not in _set(redis_db, "dead")
    retry = _set(redis_db, "retry")
    assert retry[uncaught]["error_class"] == "wurk_django.errors.SoftTimeLimitExceeded"
    assert retry[spin]["error_class"] == "wurk_django.errors.HardTimeLimitExceeded"
    assert "time_limit=1s" in retry[spin]["error_message"]
    # An async job's task is cancelled (its thread sleeps in the event loop, where no bytecode runs).
    assert "asoft:cancelled" in recorded
    assert retry[async_soft]["error_class"] == "wurk_django.errors.SoftTimeLimitExceeded"
    assert retry[async_hard]["error_class"] == "wurk_django.errors.HardTimeLimitExceeded"
    dead = _set(redis_db, "dead")
    assert dead[sleeper]["error_class"] == "wurk_django.errors.HardTimeLimitExceeded"
    assert "time_limit=0.5s" in dead[short]["error_message"]  # the push's own limit won

    # Three threads were abandoned; two fresh ones run two jobs at the same time.
    Pair.perform_async("after", 2)
    Pair.perform_async("after", 2)
    wait_for(lambda: _recorded(redis_db).count("after:together") == 2, timeout=90,
             message="two jobs running at once after the abandonments")
    # The abandoned threads of the spin, the async job and the 3 s sleeper (once its sleep
    # returned) ended; the sleeper wrote nothing after its sleep (HardStop unwound it).
    wait_for(lambda: worker.output().count("abandoned job thread") >= 3, timeout=60,
             message="three abandoned threads ended")
    assert worker.output().count("its thread is abandoned and replaced") == 4  # spin, both sleepers, async
    assert "sleep3:woke" not in _recorded(redis_db)
    # Nothing lost, nothing twice: no queue, no private list holds any job.
    assert redis_db.llen("queue:default") == 0
    # The last jobs' ACKs leave with their threads' next fetch: wait for them.
    wait_for(lambda: all(redis_db.llen(key) == 0 for key in redis_db.scan_iter("queue:default|*")), timeout=30,
             message="every private list empty (each job acknowledged once)")
    everywhere = [jid for name in ("retry", "dead") for jid in _set(redis_db, name)]
    assert sorted(everywhere) == sorted({uncaught, spin, sleeper, short, async_soft, async_hard})
    assert worker.alive()


def test_bad_limits_are_refused_at_the_push_and_ignored_in_a_fetched_job(redis_db, worker_factory):
    for bad in (0, -1, "10", float("nan"), True):
        with pytest.raises(ValueError, match="time_limit"):
            SoftCaught.set(time_limit=bad).perform_async("x")
        with pytest.raises(ValueError, match="soft_time_limit"):
            SoftCaught.set(soft_time_limit=bad).perform_async("x")
    def quick():
        pass

    decorated = job(soft_time_limit=dt.timedelta(seconds=2), time_limit=5)(quick)
    assert decorated.get_options()["time_limit"] == 5
    with pytest.raises(TypeError, match="soft_time_limit"):
        type("BadLimits", (SoftCaught,), {"__module__": __name__, "soft_time_limit": "soon"})
    # A payload written by hand with a bad limit: the worker runs it without that limit.
    redis_db.lpush("queue:default", json.dumps({
        "class": "tests.jobsapp.limit_jobs.Pair", "args": ["bad", 1], "jid": "b" * 24, "queue": "default",
        "retry": False, "time_limit": "soon", "soft_time_limit": -3, "created_at": 1}))
    worker = worker_factory("-c", "1")
    wait_for(lambda: "bad:together" in _recorded(redis_db), timeout=60, message="the job with bad limits ran")
    [line] = [line for line in worker.output().splitlines() if "runs without its bad time limits:" in line]
    assert "'time_limit' must be a finite number" in line and "'soft_time_limit' must be" in line


def test_a_foreign_payload_with_time_limit_1e308_runs_with_one_warning_issue_43_item_6(redis_db, worker_factory):
    """A raw LPUSH (as Ruby or any client writes) with ``time_limit: 1e308``: the job runs
    without that limit, the worker says so once, and no traceback follows (the watchdog
    once logged an OverflowError every second for the life of the process)."""
    import time

    worker = worker_factory("-c", "1")
    for n in (1, 2):
        redis_db.lpush("queue:default", json.dumps({
            "class": "tests.jobsapp.limit_jobs.Pair", "args": [f"huge{n}", 1], "jid": f"{n}" * 24,
            "queue": "default", "retry": False, "time_limit": 1e308, "created_at": 1}))
    wait_for(lambda: {"huge1:together", "huge2:together"} <= set(_recorded(redis_db)), timeout=60,
             message="both jobs with time_limit 1e308 ran")
    time.sleep(3)  # the watchdog's failures came once a second
    output = worker.output()
    warnings = [line for line in output.splitlines()
                if "runs without its bad time limit: job option 'time_limit'" in line]
    assert len(warnings) == 2, output  # one per job
    assert "1e+308 seconds, above the maximum of 86400" in warnings[0]
    assert "Traceback" not in output and "OverflowError" not in output and "watchdog failed" not in output
    assert redis_db.zcard("dead") == 0 and redis_db.zcard("retry") == 0
    assert worker.alive()
