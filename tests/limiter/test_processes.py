"""Limiters shared by real worker processes: 2 processes x 10 threads each
(ENT-120..127, ENT-151)."""

from __future__ import annotations

import json
import time

import pytest

from tests.support import wait_for
from wurk_django import limiter

pytestmark = pytest.mark.slow

EXTRA = json.dumps({"IMPORT_ON_MISS": ["tests.limiter"], "POLL_INTERVAL_AVERAGE": 0.2})


def start_workers(worker_factory, count: int = 2):
    return [worker_factory("-c", "10", env={"WURK_TEST_EXTRA": EXTRA}) for _ in range(count)]


def push(redis_db, klass: str, args_list: list[list]) -> None:
    from wurk_django.client.push import Client

    for args in args_list:
        Client().push({"class": klass, "args": args, "queue": "default"})


def outcome(redis_db, workers) -> str:
    return "\n".join(w.output()[-3000:] for w in workers)


def test_concurrent_never_exceeds_its_limit_and_every_job_finishes(redis_db, worker_factory):
    workers = start_workers(worker_factory)
    push(redis_db, "tests.limiter.jobs.Hammer", [[n] for n in range(60)])
    wait_for(lambda: redis_db.llen("test:lim:done") >= 60, timeout=60,
             message=f"60 hammer jobs done; logs:\n{outcome(redis_db, workers)}")
    time.sleep(0.3)
    assert sorted(int(x) for x in redis_db.lrange("test:lim:done", 0, -1)) == list(range(60))
    assert int(redis_db.get("test:lim:high")) == 3  # the limit was reached, never passed
    overrated = [int(x) for x in redis_db.lrange("test:lim:overrated", 0, -1)]
    assert len(overrated) == 60 and sum(overrated) > 0  # some jobs were rescheduled and came back
    assert not redis_db.zcard("retry") and not redis_db.zcard("dead")
    stats = limiter.concurrent("hammer", 3, register=False).status()
    assert stats["held"] == 60 and stats["overages"] == 0 and stats["used"] == 0


def test_window_admits_at_most_five_in_any_second(redis_db, worker_factory):
    workers = start_workers(worker_factory)
    push(redis_db, "tests.limiter.jobs.Windowed", [[n] for n in range(50)])
    # Every admission stays in lmtr-w for at least a second: sampling faster catches them all.
    seen: dict[bytes, float] = {}
    deadline = time.monotonic() + 60
    while redis_db.llen("test:lim:done") < 50:
        assert time.monotonic() < deadline, outcome(redis_db, workers)
        seen.update(redis_db.zrange("lmtr-w:win5", 0, -1, withscores=True))
        time.sleep(0.2)
    seen.update(redis_db.zrange("lmtr-w:win5", 0, -1, withscores=True))
    times = sorted(seen.values())
    assert len(times) == 50
    # The invariant the script keeps: an admission at t sees at most 5 entries in [t-1, t].
    worst = max(sum(1 for s in times if t - 1 <= s <= t) for t in times)
    assert worst == 5
    assert times[-1] - times[0] >= 9  # 50 calls at 5 a second take nine seconds at least
    assert not redis_db.zcard("retry") and not redis_db.zcard("dead")


def test_bucket_leaky_and_points_each_admit_exactly_their_quota(redis_db, worker_factory):
    workers = start_workers(worker_factory)
    kinds = ("bucket", "leaky", "points")
    push(redis_db, "tests.limiter.jobs.Quota", [[kind, n] for n in range(25) for kind in kinds])
    for kind in kinds:
        wait_for(lambda kind=kind: redis_db.llen(f"test:lim:{kind}") >= 25, timeout=30,
                 message=f"25 {kind} jobs; logs:\n{outcome(redis_db, workers)}")
    for kind in kinds:
        results = [x.decode() for x in redis_db.lrange(f"test:lim:{kind}", 0, -1)]
        assert results.count("admitted") == 7, kind
        assert results.count("refused") == 18, kind


def test_a_killed_holder_frees_its_slot_after_lock_timeout(redis_db, worker_factory):  # ENT-120
    worker, = start_workers(worker_factory, count=1)
    push(redis_db, "tests.limiter.jobs.HoldForever", [[]])
    wait_for(lambda: redis_db.llen("test:lim:holding"), timeout=20, message="the job holding the slot")
    worker.kill()  # kill -9: no finally, no release
    killed_at = time.monotonic()
    crash = limiter.concurrent("crash", 1, wait_timeout=0, lock_timeout=2, register=False)
    with pytest.raises(limiter.OverLimit):
        crash.within_limit(lambda: None)  # the dead holder's slot is still counted
    wait_for(lambda: _acquired(crash), timeout=6, interval=0.1, message="the slot to be reclaimed")
    assert 0.5 < time.monotonic() - killed_at < 4.5
    assert crash.status()["reclaimed"] == 1


def _acquired(lim) -> bool:
    try:
        lim.within_limit(lambda: None)
        return True
    except limiter.OverLimit:
        return False


