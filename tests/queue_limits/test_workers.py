"""Queue limits across real worker processes (issue 47 item 4): two processes of five
threads never run more jobs of a capped queue at once than its limit, an uncapped queue
beside it drains meanwhile, and a process killed with slots in hand gives them back."""

from __future__ import annotations

import json
import signal

import pytest

from tests.support import WorkerProcess, stop_process, wait_for
from wurk_django import keys
from wurk_django.queue_limits import caps as queue_caps

LIMIT = 2


def _worker(*queues: str, **extra) -> WorkerProcess:
    settings = {"QUEUE_LIMITS": {"reports": LIMIT}, "FETCH_POLL_INTERVAL": 0.5,
                "SUPER_FETCH_REAPER_INTERVAL": 1, "REAPER_ORPHAN_GRACE": 1, **extra}
    args = [arg for name in queues for arg in ("-q", name)]
    return WorkerProcess("-c", "5", *args, env={"WURK_TEST_EXTRA": json.dumps(settings)})


def _ints(redis_db, key: str) -> list[int]:
    return [int(v) for v in redis_db.lrange(key, 0, -1)]


def _stop(*workers: WorkerProcess) -> None:
    for worker in workers:
        if worker.alive():
            stop_process(worker.proc, signal.SIGTERM, 20)


@pytest.mark.parametrize("extra", [{}, {"FETCH_NOTIFICATIONS": False}, {"FETCH_SIZE": 1}],
                         ids=["fetch-ahead+push-watch", "wake-lists", "one-at-a-time"])
def test_two_processes_never_run_more_than_the_limit_and_other_queues_drain(redis_db, extra):
    from tests.jobsapp.cap_jobs import Capped, Free

    # One process leads with the capped queue, the other with the free one: both walks.
    first = _worker("reports", "default", **extra)
    second = _worker("default", "reports", **extra)
    try:
        # Both fetching before the capped jobs come: the limit is then shared by ten threads.
        wait_for(lambda: redis_db.scard("processes") == 2, timeout=90, message="both workers to beat")
        capped = 12
        for n in range(capped):
            Capped.perform_async(f"c{n}", 0.4)
        wait_for(lambda: redis_db.llen("test:caps:started") >= 2, timeout=90, message="capped jobs to start")
        free = 40
        for n in range(free):
            Free.perform_async(f"f{n}")
        wait_for(lambda: redis_db.llen("test:free:done") == free, timeout=90, message="the free queue to drain")
        # The free queue drained while the capped one still had jobs waiting (12 jobs of
        # 0.4 s, two at a time, take 2.4 s at least): it was not held up behind the full one.
        assert max(_ints(redis_db, "test:free:capped-waiting")) > 0
        wait_for(lambda: redis_db.llen("test:caps:done") == capped, timeout=120, message="the capped jobs")
        seen = _ints(redis_db, "test:caps:seen")
        assert len(seen) == capped
        assert max(seen) == LIMIT  # never more than the limit at once, and the limit was used
        # (Which process ran them is not asserted: a thread that frees a slot often takes it
        # again at once. That a process holding the slots keeps the other one's threads off
        # the queue is the next test's.)
        wait_for(lambda: queue_caps.in_use(redis_db, ["reports"]) == {"reports": 0}, timeout=30,
                 message="every slot to be freed")
    finally:
        _stop(first, second)
    for worker in (first, second):
        assert "Traceback" not in worker.output(), worker.output()[-3000:]


def test_a_process_killed_with_slots_in_hand_frees_them_and_the_queue_goes_on(redis_db):
    from tests.jobsapp.cap_jobs import Capped, Free

    # Two long jobs (long only the first time they run) take both slots in the first process.
    Capped.perform_async("long1", 300, True)
    Capped.perform_async("long2", 300, True)
    first = _worker("reports")
    second = None
    try:
        wait_for(lambda: redis_db.llen("test:caps:started") == 2, timeout=90, message="the long jobs to start")
        held = redis_db.hkeys(keys.queue_limit("reports"))
        assert len(held) == 2 and all(f"|{first.pid}|".encode() in field for field in held)
        second = _worker("reports", "default")
        for n in range(3):
            Capped.perform_async(f"short{n}", 0.1)
        # The second process (five idle threads) runs other queues' jobs, not the capped ones:
        # the first holds every slot. The free job is the second's (the first does not serve
        # its queue), and the second's idle threads went through several polls meanwhile.
        wait_for(lambda: redis_db.scard("processes") == 2, timeout=90, message="the second worker to beat")
        for n in range(3):
            Free.perform_async(f"marker{n}")
        wait_for(lambda: redis_db.llen("test:free:done") == 3, timeout=90, message="the free jobs")
        assert redis_db.llen("queue:reports") == 3 and redis_db.llen("test:caps:started") == 2
        first.kill()  # kill -9, slots and jobs in hand
        # The second process frees the dead one's slots (the reaper's rules), the reaper brings
        # its two jobs back (they run again, at once this time), and the short ones run.
        wait_for(lambda: redis_db.llen("test:caps:done") == 3, timeout=120, message="the short jobs to run")
        # The two killed jobs never counted themselves out: the short ones saw them as running.
        assert max(_ints(redis_db, "test:caps:seen")[2:]) - 2 <= LIMIT
        wait_for(lambda: sorted(redis_db.lrange("test:caps:again", 0, -1)) == [b"long1", b"long2"], timeout=120,
                 message="the killed process's jobs to come back")
        wait_for(lambda: queue_caps.in_use(redis_db, ["reports"]) == {"reports": 0}, timeout=30,
                 message="every slot to be freed")
        assert "slot(s) of capped queue reports held by processes that are gone" in second.output()
    finally:
        first.kill()
        if second is not None:
            _stop(second)
    assert "Traceback" not in second.output(), second.output()[-3000:]


def test_a_failed_run_and_a_run_stopped_at_its_hard_limit_free_their_slots(redis_db):
    """Whatever the settlement says (dead after a failure, stopped and abandoned at its hard
    time limit), the slot goes back: the queue's later jobs run."""
    from tests.jobsapp.cap_jobs import Capped, CappedFails, CappedStuck

    CappedStuck.perform_async("stuck1")
    CappedStuck.perform_async("stuck2")
    CappedFails.perform_async("fail1")
    CappedFails.perform_async("fail2")
    for n in range(2):
        Capped.perform_async(f"after{n}", 0.1)
    worker = _worker("reports")
    try:
        wait_for(lambda: redis_db.llen("test:caps:done") == 2, timeout=120, message="the jobs after them to run")
        assert redis_db.llen("test:caps:stuck") == 2
        wait_for(lambda: redis_db.zcard("dead") == 4, timeout=60, message="four jobs in the dead set")
        wait_for(lambda: queue_caps.in_use(redis_db, ["reports"]) == {"reports": 0}, timeout=30,
                 message="every slot to be freed")
        # The two stuck jobs took both slots first (the queue is first in, first out): the
        # jobs after them ran only because the hard stop's settlement freed them.
        assert sorted(redis_db.lrange("test:caps:stuck", 0, -1)) == [b"stuck1", b"stuck2"]
    finally:
        _stop(worker)
