"""Fair fetching with real worker processes (issue 42 items 1 and 2).

A thread that fetches ahead holds the jobs behind the one it runs; when that job is
long they must go back to the queue (for the idle threads) at once, not wait for it.
Every scenario puts one long job among short ones on ``-c 5``: on main the thread that
takes the long job keeps the few short jobs it fetched with it until the long job ends.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.jobsapp.batch_jobs import Callbacks
from tests.jobsapp.jobs import FileRecordJob
from tests.support import WorkerProcess, wait_for, wurk_settings
from wurk_django import payload
from wurk_django.batch import Batch

SHORT = 200  # on each side of the long job
LONG = 10.0  # seconds


def _raw(job_class: str, args: list) -> bytes:
    return payload.dumps({"class": job_class, "args": args, "queue": "default", "jid": payload.new_jid(),
                          "created_at": payload.now_ms(), "enqueued_at": payload.now_ms(), "retry": False})


def _busy_queue(redis_db, first: int = SHORT, then: int = SHORT) -> None:
    """``first`` short jobs, the long one, ``then`` short ones, in fetch order."""
    short = "tests.jobsapp.jobs.FileRecordJob"
    jobs = [_raw(short, [f"s{i}", 0.002]) for i in range(first)]
    jobs.append(_raw("tests.jobsapp.jobs.SlowJob", [LONG, "long"]))
    jobs += [_raw(short, [f"s{i}", 0.002]) for i in range(first, first + then)]
    redis_db.sadd("queues", "default")
    redis_db.lpush("queue:default", *jobs)  # one LPUSH: the first of the list is fetched first


def _records(path: Path) -> dict[str, float]:
    """value -> when it finished (epoch seconds), from the record file."""
    if not path.exists():
        return {}
    return {value: float(at) for value, at, _ in (line.split() for line in path.read_text().splitlines() if line)}


def _worker(path: Path, *args: str, **extra) -> WorkerProcess:
    env = {"WURK_TEST_RECORD_FILE": str(path), "WURK_TEST_EXTRA": json.dumps(extra)}
    return WorkerProcess("-c", "5", *args, env=env)


def _long_started(redis_db) -> float:
    wait_for(lambda: b"long" in redis_db.lrange("test:started", 0, -1), timeout=30, interval=0.01,
             message="the long job to start")
    return time.time()


def _stop(worker: WorkerProcess) -> None:
    if worker.alive():
        worker.kill()


def test_no_short_job_waits_behind_the_long_one_issue_42(redis_db, tmp_path):
    ran = tmp_path / "ran"
    _busy_queue(redis_db)
    worker = _worker(ran)
    try:
        started = _long_started(redis_db)
        wait_for(lambda: len(_records(ran)) >= 2 * SHORT, timeout=LONG - 1, interval=0.05,
                 message="every short job to run while the long one runs")
        assert redis_db.lrange("test:finished", 0, -1) == [], "the long job ended first: the test proves nothing"
        last = max(_records(ran).values())
        # The 200 short jobs after the long one take 4 threads about 0.1-0.5 s; none may wait for it.
        assert last - started < 4.0, f"the last short job ended {last - started:.1f}s after the long one began"
    finally:
        _stop(worker)


def test_a_batch_callback_does_not_wait_behind_a_long_job_issue_42(redis_db, tmp_path):
    """The batch's members sit on both sides of the long job: its thread, on main, keeps
    a few members fetched ahead until the long job ends, and the callback waits as long."""
    ran = tmp_path / "ran"
    redis_db.sadd("queues", "default")
    batch = Batch()
    batch.on("success", Callbacks, {"tag": "fair"})
    with batch.jobs():
        for i in range(SHORT):
            FileRecordJob.perform_async(f"b{i}", 0.002)
    redis_db.lpush("queue:default", _raw("tests.jobsapp.jobs.SlowJob", [LONG, "long"]))
    with batch.jobs():
        for i in range(SHORT, 2 * SHORT):
            FileRecordJob.perform_async(f"b{i}", 0.002)
    worker = _worker(ran)
    try:
        started = _long_started(redis_db)
        wait_for(lambda: redis_db.lrange("test:callbacks", 0, -1), timeout=LONG - 1, interval=0.05,
                 message="the batch callback to run while the long job runs")
        assert time.time() - started < LONG - 1
        assert redis_db.lrange("test:finished", 0, -1) == []
        assert redis_db.lrange("test:callbacks", 0, -1) == [f"success:{batch.bid}:fair".encode()]
    finally:
        _stop(worker)


def test_a_paused_queue_starts_nothing_after_the_pause_issue_42(redis_db, tmp_path):
    from wurk_django import pause

    ran = tmp_path / "ran"
    # Enough short jobs after the long one that the queue is still busy when it is paused.
    _busy_queue(redis_db, first=SHORT, then=20 * SHORT)
    worker = _worker(ran, FETCH_NOTIFICATIONS=True)
    try:
        _long_started(redis_db)
        pause.pause("default", redis_db)
        paused_at = time.time()
        # A fetcher reads the paused set at most 2 s late (its cache), then starts nothing more of it.
        time.sleep(LONG - 1.5)
        assert redis_db.lrange("test:finished", 0, -1) == []
        late = sorted(at - paused_at for at in _records(ran).values() if at - paused_at > 2.1)
        assert late == [], f"{len(late)} job(s) of the paused queue ran after the pause"
        assert redis_db.llen("queue:default") > 0, "the queue drained before the pause: the test proves nothing"
        # The long job ends; the thread that ran it must hold nothing of the paused queue.
        wait_for(lambda: redis_db.lrange("test:finished", 0, -1) == [b"long"], timeout=10)
        time.sleep(1.0)
        late = sorted(at - paused_at for at in _records(ran).values() if at - paused_at > 2.1)
        assert late == [], f"{len(late)} job(s) held ahead ran after the long job, past the pause"
    finally:
        _stop(worker)
        pause.unpause("default", redis_db)


def test_kill_9_while_jobs_are_handed_back_loses_none_issue_42(redis_db, tmp_path):
    ran = tmp_path / "ran"
    _busy_queue(redis_db)
    reaper = {"REAPER_ORPHAN_GRACE": 1, "SUPER_FETCH_REAPER_INTERVAL": 1}
    worker = _worker(ran, **reaper)
    second = None
    try:
        _long_started(redis_db)
        wait_for(lambda: len(_records(ran)) >= 2 * SHORT, timeout=LONG - 2, interval=0.05,
                 message="the short jobs to run while the long one runs")
        worker.kill()
        assert redis_db.lrange("test:finished", 0, -1) == []
        # The long job was in the dead process's private list: the next worker's reaper brings it back.
        second = _worker(ran, **reaper)
        wait_for(lambda: redis_db.lrange("test:finished", 0, -1) == [b"long"], timeout=60, interval=0.1,
                 message="the long job to run again after the kill")
        assert sorted(_records(ran)) == sorted(f"s{i}" for i in range(2 * SHORT))
        assert redis_db.llen("queue:default") == 0
        assert not [k for k in redis_db.scan_iter("queue:default|*") if redis_db.llen(k)]
    finally:
        _stop(worker)
        if second is not None:
            _stop(second)


@pytest.mark.parametrize("size", [0, 1])
def test_fetch_size_one_fetches_one_job_at_a_time_issue_42(redis_db, tmp_path, size):
    """``FETCH_SIZE`` 0 or 1: no thread ever holds a job ahead (Sidekiq's fetch)."""
    ran = tmp_path / "ran"
    jobs = [_raw("tests.jobsapp.jobs.FileRecordJob", [f"s{i}", 0.001]) for i in range(300)]
    redis_db.sadd("queues", "default")
    redis_db.lpush("queue:default", *jobs)
    worker = _worker(ran, FETCH_SIZE=size)
    try:
        most = 0

        def drained() -> bool:
            nonlocal most
            held = sum(redis_db.llen(k) for k in redis_db.scan_iter("queue:default|*"))
            most = max(most, held)
            return len(_records(ran)) >= 300

        wait_for(drained, timeout=30, interval=0.005, message="the queue to drain")
        # Each of 5 threads holds its running job and at most the one whose ACK rides its next fetch.
        assert most <= 10, f"{most} jobs were in private lists at once"
        assert "Traceback" not in worker.output()
    finally:
        _stop(worker)


def test_fetch_size_is_a_setting_issue_42():
    from wurk_django.conf import get_config, reset_config
    from wurk_django.server.fetch.slot import FetchSlot

    with wurk_settings(FETCH_SIZE=4):
        reset_config()
        assert get_config().fetch_size == 4
        assert FetchSlot(0, os.getpid(), get_config()).most == 4
    reset_config()
    assert get_config().fetch_size == 16


def test_hand_back_puts_the_held_jobs_at_the_fetch_end_in_order_issue_42(redis_db):
    """One script per list: the jobs leave the private list for the fetch end of the queue,
    the next one to run first; the marker naming the running job by its place from the
    oldest end still names it."""
    from wurk_django.conf import get_config
    from wurk_django.server.fetch.reliable import ReliableFetch
    from wurk_django.server.fetch.slot import ReliableUnit

    fetcher = ReliableFetch(get_config())
    slot = fetcher._mine()
    public, private = slot.keys("default")
    redis_db.lpush(public, b"j0", b"j1", b"j2", b"j3", b"later")  # j0 is fetched first
    moved = [redis_db.lmove(public, private, "RIGHT", "LEFT") for _ in range(4)]
    assert moved == [b"j0", b"j1", b"j2", b"j3"]
    units = [ReliableUnit("default", public, private, job, slot) for job in moved]
    slot.ahead.extend(units[2:])  # j1 runs, named by its place: second from the oldest end
    redis_db.set(slot.marker, "-2|default")
    slot.marked = "-2|default"
    assert fetcher.hand_back(slot) == 2
    assert not slot.ahead
    assert redis_db.lrange(private, 0, -1) == [b"j1", b"j0"]
    # Fetched from the right: j2, then j3, then the job that was behind them.
    assert redis_db.lrange(public, 0, -1) == [b"later", b"j3", b"j2"]
    assert redis_db.get(slot.marker) == b"-2|default"
    assert redis_db.lindex(private, -2) == b"j1"
    assert fetcher.hand_back(slot) == 0
    fetcher.terminate()
