"""Batches with several real worker processes racing on them (issue 13).

Each test prints its figures; the callbacks record every run in Redis, so
"exactly once" is counted, not assumed.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.batch.conftest import callbacks
from tests.jobsapp.batch_jobs import (
    AlwaysFails,
    Callbacks,
    FailOnce,
    KillSelfOnce,
    Mark,
    MarkThenWait,
    Noop,
    SlowMark,
)
from tests.support import wait_for
from wurk_django.batch import Batch, Status

pytestmark = pytest.mark.slow

FAST = {"POLL_INTERVAL_AVERAGE": 1, "SUPER_FETCH_REAPER_INTERVAL": 1, "LOG_FLUSH_INTERVAL": 0}


def _env(**extra) -> dict:
    return {"WURK_TEST_EXTRA": json.dumps({**FAST, **extra})}


def _report(capsys, title: str, **figures) -> None:
    with capsys.disabled():
        print(f"\n[{title}] " + ", ".join(f"{k}={v}" for k, v in figures.items()))


def _settled(redis_db, bid: str, event: str, count: int = 1) -> list[str]:
    """Wait for ``count`` runs of ``event``, then a little longer, so a duplicate would show."""
    wait_for(lambda: sum(c.startswith(f"{event}:{bid}:") for c in callbacks(redis_db)) >= count, timeout=90,
             interval=0.1, message=f"{event} of {bid}")
    time.sleep(1.5)
    return callbacks(redis_db)


def _batch(tag: str) -> Batch:
    batch = Batch()
    batch.description = tag
    for event in ("success", "complete", "death"):
        batch.on(event, Callbacks, {"tag": tag})
    return batch


def test_ten_thousand_jobs_success_runs_once(redis_db, worker_factory, capsys):
    batch = _batch("10k")
    started = time.monotonic()
    with batch.jobs():
        Noop.perform_bulk([[i] for i in range(10_000)])
    pushed = time.monotonic() - started
    assert Status(batch.bid).total == 10_000
    workers = [worker_factory("-c", "8", env=_env()) for _ in range(3)]
    runs = _settled(redis_db, batch.bid, "success")
    elapsed = time.monotonic() - started
    status = Status(batch.bid)
    _report(capsys, "10k batch", jobs=status.total, processes=len(workers), push_s=round(pushed, 2),
            total_s=round(elapsed, 1), success_runs=runs.count(f"success:{batch.bid}:10k"))
    assert runs.count(f"success:{batch.bid}:10k") == 1
    assert runs.count(f"complete:{batch.bid}:10k") == 1
    assert status.pending == 0 and status.failures == 0 and status.complete
    assert redis_db.scard(f"b-{batch.bid}-jids") == 0
    assert all(w.alive() for w in workers)


def test_fail_retry_succeed_then_success(redis_db, worker_factory, capsys):
    batch = _batch("retry")
    with batch.jobs():
        FailOnce.perform_async("r1")
        for i in range(20):
            Mark.perform_async(i)
    worker_factory("-c", "4", env=_env())
    worker_factory("-c", "4", env=_env())
    wait_for(lambda: Status(batch.bid).failures == 1, timeout=30, message="the failure to be booked")
    assert f"success:{batch.bid}:retry" not in callbacks(redis_db)
    runs = _settled(redis_db, batch.bid, "success")
    marks = [m.decode() for m in redis_db.lrange("test:marks", 0, -1)]
    assert f"{batch.bid}:r1" in marks  # the retry ran before success fired
    status = Status(batch.bid)
    _report(capsys, "retry", failures=status.failures, pending=status.pending, callbacks=len(runs))
    assert runs.count(f"success:{batch.bid}:retry") == 1 and runs.count(f"complete:{batch.bid}:retry") == 1
    assert status.failures == 0 and status.pending == 0 and status.failed_jids == []


def test_death_fires_death_once_and_complete_not_success(redis_db, worker_factory):
    batch = _batch("dies")
    with batch.jobs():
        dead_jid = AlwaysFails.perform_async("d")
        for i in range(30):
            Mark.perform_async(i)
    worker_factory("-c", "4", env=_env())
    worker_factory("-c", "4", env=_env())
    runs = _settled(redis_db, batch.bid, "complete")
    wait_for(lambda: f"death:{batch.bid}:dies" in callbacks(redis_db), message="the death callback")
    time.sleep(1)
    runs = callbacks(redis_db)
    assert runs.count(f"death:{batch.bid}:dies") == 1
    assert runs.count(f"complete:{batch.bid}:dies") == 1
    assert f"success:{batch.bid}:dies" not in runs
    status = Status(batch.bid)
    assert status.dead_jids == [dead_jid] and status.pending == 1 and status.dead
    assert redis_db.zscore("dead-batches", batch.bid) is not None


def test_three_levels_parent_fires_after_children(redis_db, worker_factory):
    root = _batch("root")
    with root.jobs():
        SlowMark.perform_async("root", 0.05)
        mids = []
        for m in range(2):
            mid = _batch(f"mid{m}")
            with mid.jobs():
                SlowMark.perform_async(f"mid{m}", 0.05)
                leaf = _batch(f"leaf{m}")
                with leaf.jobs():
                    for i in range(10):
                        SlowMark.perform_async(f"leaf{m}-{i}", 0.2)
            mids.append((mid, leaf))
    worker_factory("-c", "5", env=_env())
    worker_factory("-c", "5", env=_env())
    _settled(redis_db, root.bid, "success")
    stamps = {}
    for batch in [root, *(b for pair in mids for b in pair)]:
        status = Status(batch.bid)
        assert status.success and status.pending == 0, batch.description
        stamps[batch.description] = (status.complete_at, status.success_at)
    for m in range(2):
        assert stamps[f"leaf{m}"][1] <= stamps[f"mid{m}"][1] <= stamps["root"][1]
        assert stamps[f"leaf{m}"][0] <= stamps[f"mid{m}"][0] <= stamps["root"][0]
    runs = callbacks(redis_db)
    for tag in ("root", "mid0", "mid1", "leaf0", "leaf1"):
        assert sum(c.startswith("success:") and c.endswith(f":{tag}") for c in runs) == 1, tag
    order = [c.rsplit(":", 1)[1] for c in runs if c.startswith("success:")]
    assert order.index("root") == len(order) - 1


def test_kill_9_mid_batch_keeps_counts_exact(redis_db, worker_factory, capsys):
    batch = _batch("kill")
    with batch.jobs():
        for i in range(300):
            MarkThenWait.perform_async(i, 0.05)
            if i % 100 == 50:
                KillSelfOnce.perform_async(f"k{i}")
    # A swarm: each child killed by its job is replaced, and the replacement (a fork
    # sibling) recovers what the dead one held at once.
    worker_factory("--processes", "2", "-c", "4", env=_env())
    runs = _settled(redis_db, batch.bid, "success")
    kills = sum(int(redis_db.get(f"test:killonce:k{i}") or 0) >= 1 for i in (50, 150, 250))
    marks = [m.decode() for m in redis_db.lrange("test:marks", 0, -1)]
    status = Status(batch.bid)
    _report(capsys, "kill -9", jobs=status.total, kills=kills, runs=len(marks),
            reruns=len(marks) - len(set(marks)), success_runs=runs.count(f"success:{batch.bid}:kill"))
    assert kills == 3
    assert len(marks) > len(set(marks))  # jobs cut short by a kill did run again
    assert status.total == 303 and status.pending == 0 and status.failures == 0
    assert len(set(marks)) == 303  # every job ran; re-runs of recovered jobs counted once
    assert runs.count(f"success:{batch.bid}:kill") == 1 and runs.count(f"complete:{batch.bid}:kill") == 1


def test_poison_pill_in_a_batch_dies_and_completes(redis_db, worker_factory):  # PRO-601
    from tests.jobsapp.jobs import KillerJob

    batch = _batch("poison")
    with batch.jobs():
        killer = KillerJob.perform_async()
        for i in range(5):
            Mark.perform_async(i)
    # One process, one thread: the killer takes its worker down each time it runs; the
    # supervisor respawns it and the new process recovers the job, until the third
    # recovery kills it as a poison pill (the death path, from the reaper).
    worker_factory("--processes", "1", "-c", "1", env=_env())
    runs = _settled(redis_db, batch.bid, "complete")
    assert runs.count(f"death:{batch.bid}:poison") == 1 and runs.count(f"complete:{batch.bid}:poison") == 1
    assert f"success:{batch.bid}:poison" not in runs
    status = Status(batch.bid)
    assert status.dead_jids == [killer] and status.pending == 1 and status.total == 6
