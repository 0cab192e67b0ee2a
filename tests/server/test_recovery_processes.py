"""The order of reclaimed jobs after a real ``kill -9`` (issue 31 item 4; RUN-142, PRO-141).

A worker with four threads runs a deep queue of short jobs, so each thread fetches
ahead; it is killed with SIGKILL mid-drain and an in-process reaper takes its
private lists back. The jobs it had fetched and never started must be fetched
next, in queue order as docs/reliability.md defines it for a dead process: each
thread's list in the order that thread fetched it, the lists merged by the
``enqueued_at`` of each one's next job.

That is the order the jobs were queued in, except where a thread fetched jobs out
of it: on a loaded machine a 2 ms job often outlives the fair watcher's 5 ms bound,
its thread hands the jobs it fetched ahead back to the fetch end (fair.py), in
front of older ones an earlier hand-back put there, and the next fetch moves them
in that order. The dead thread would have run them so, and the reaper keeps it.
"""

from __future__ import annotations

import json

import pytest

from tests.support import wait_for
from wurk_django import payload
from wurk_django.server.reaper import Reaper

pytestmark = pytest.mark.slow

JOBS = 3000


def _queue_jobs(redis_db) -> None:
    """Pushed raw, each with its own ``enqueued_at`` (a bulk push shares one): job n
    was queued n ms after the first."""
    base = payload.now_ms()
    jobs = [payload.dumps({"class": "tests.jobsapp.jobs.SlowJob", "args": [0.002, str(n)], "queue": "default",
                           "jid": f"{n:024d}", "retry": True, "created_at": base + n, "enqueued_at": base + n})
            for n in range(JOBS)]
    for start in range(0, JOBS, 500):
        redis_db.lpush("queue:default", *jobs[start:start + 500])


def _seq(raw: bytes) -> int:
    return int(json.loads(raw)["jid"])


def _merged(lists: dict[int, list[bytes]]) -> list[bytes]:
    """The documented order of a dead process's jobs: each slot's in the order it fetched
    them (oldest first here), the slots merged by the ``enqueued_at`` of their next job,
    the lower slot first among equals."""
    heads = {slot: list(jobs) for slot, jobs in lists.items() if jobs}
    merged = []
    while heads:
        slot = min(heads, key=lambda number: (payload.epoch_seconds(json.loads(heads[number][0])["enqueued_at"]),
                                              number))
        merged.append(heads[slot].pop(0))
        if not heads[slot]:
            del heads[slot]
    return merged


def _forget(redis_db, pid: int) -> None:
    """The dead worker's heartbeat, expired early (its TTL is 60 s)."""
    for member in redis_db.smembers("processes"):
        identity = member.decode()
        if f":{pid}:" in identity:
            redis_db.delete(identity)
            redis_db.srem("processes", identity)


def test_jobs_a_killed_worker_fetched_ahead_are_fetched_next_in_queue_order(redis_db, worker_factory):
    for _attempt in range(3):
        redis_db.flushdb()
        _queue_jobs(redis_db)
        worker = worker_factory("-c", "4", "-q", "default")
        wait_for(lambda: redis_db.llen("test:started") >= 300, timeout=60, message="the worker to get going")
        worker.kill()  # SIGKILL, reaped by pid
        lists = [key for key in redis_db.scan_iter(match=f"queue:default|*|{worker.pid}|*")]
        held = {key: redis_db.lrange(key, 0, -1) for key in lists}
        if sum(len(jobs) for jobs in held.values()) - len(held) >= 2:
            break  # some jobs were fetched ahead of the running ones
    else:
        pytest.fail(f"no kill landed while jobs were fetched ahead: {held}")
    in_lists = {raw for jobs in held.values() for raw in jobs}
    _forget(redis_db, worker.pid)
    assert Reaper(["default"], grace=0).sweep(full=False) == len(in_lists)
    assert not list(redis_db.scan_iter(match=f"queue:default|*|{worker.pid}|*"))
    fetch_order = redis_db.lrange("queue:default", 0, -1)[::-1]
    innocent = [raw for raw in fetch_order if raw in in_lists
                and not redis_db.exists("super_fetch:recovered:" + json.loads(raw)["jid"])]
    assert len(innocent) >= 1
    uncounted = set(innocent)
    # Each slot's jobs that went back uncounted, in the order the slot fetched them.
    by_slot = {int(key.decode().rsplit("|", 1)[1]): [raw for raw in reversed(jobs) if raw in uncounted]
               for key, jobs in held.items()}
    reordered = sum(1 for jobs in by_slot.values() if [_seq(raw) for raw in jobs] != sorted(map(_seq, jobs)))
    print(f"{len(innocent)} job(s) back uncounted from {len(by_slot)} list(s), {reordered} of them fetched "
          f"out of the order queued (after hand-backs)")
    assert [_seq(raw) for raw in innocent] == [_seq(raw) for raw in _merged(by_slot)]  # queue order
    waiting = [raw for raw in fetch_order if raw not in in_lists]
    first_waiting = fetch_order.index(waiting[0])
    assert all(fetch_order.index(raw) < first_waiting for raw in innocent)  # at the fetch end
    assert sorted(_seq(raw) for raw in fetch_order) == sorted(
        {_seq(raw) for raw in fetch_order})  # nothing doubled
