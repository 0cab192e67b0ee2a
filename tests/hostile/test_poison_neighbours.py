"""Issue 12, item 4: the jobs running beside a poison pill are not buried with it."""

from __future__ import annotations

import json

import pytest

from tests.jobsapp.jobs import KillerJob, TraceJob
from tests.support import wait_for

pytestmark = pytest.mark.slow


#: The fewest innocent jobs kept queued while the killer lives, in the restart loop (see there).
TOP_UP = 500
FAST = {"WURK_TEST_EXTRA": json.dumps({"SUPER_FETCH_REAPER_INTERVAL": 1, "REAPER_ORPHAN_GRACE": 0})}


def _setup(redis_db, count: int) -> tuple[list[str], str]:
    jids = TraceJob.perform_bulk([[0.05]] * count)
    killer = KillerJob.perform_async()
    # 50 jobs from the fetch end: when it strikes, every thread is busy with a neighbour.
    raw = redis_db.lpop("queue:default")
    redis_db.linsert("queue:default", "BEFORE", redis_db.lindex("queue:default", -50), raw)
    return jids, killer


def _dead(redis_db) -> dict:
    return {json.loads(d).get("jid"): json.loads(d) for d in redis_db.zrange("dead", 0, -1)}


def _report(capsys, title: str, redis_db, jids, killer, queued_then) -> set:
    buried = set(_dead(redis_db)) - {killer}
    with capsys.disabled():
        print(f"\n[{title}] jobs={len(jids)} concurrency=10 worker_deaths={redis_db.llen('test:killer')} "
              f"innocents_buried={len(buried)} queued_when_poisoned={queued_then}")
    return buried


def _keep_queued(redis_db, jids: list[str]) -> None:
    """Push :data:`TOP_UP` more innocent jobs (their jids added to ``jids``) when fewer are queued."""
    if redis_db.llen("queue:default") < TOP_UP:
        jids += TraceJob.perform_bulk([[0.05]] * TOP_UP)


def _all_ran(redis_db, jids) -> bool:
    return not set(jids) - {r.decode() for r in redis_db.lrange("test:runs", 0, -1)}


def test_standalone_restarted_at_once_buries_no_innocent(redis_db, worker_factory, capsys):
    jids, killer = _setup(redis_db, 1000)
    # As systemd or Kubernetes would: a new worker as soon as the old one died. The dead
    # one's heartbeat is dropped at once (as its TTL would, later) so the test need not wait.
    while killer not in _dead(redis_db):
        worker = worker_factory("-c", "10", env=FAST)
        # Each life drains the queue (200 jobs/s) until its reaper's pass gives the suspect
        # back; on a loaded machine the lives could drain all 1000 before the burial, leaving
        # none of the neighbours this test is about queued (queued_then 0, seen once). Topped
        # up while the killer lives, the queue always holds hundreds of them.
        wait_for(lambda w=worker: _keep_queued(redis_db, jids) or not w.alive() or killer in _dead(redis_db),
                 timeout=60, message="the worker to die or the killer to be poisoned")
        if not worker.alive():
            for identity in redis_db.smembers("processes"):
                if f":{worker.pid}:".encode() in identity:
                    redis_db.delete(identity)
    queued_then = redis_db.llen("queue:default")
    wait_for(lambda: _all_ran(redis_db, jids), timeout=60, message="every innocent job to run")
    assert worker.stop() == 0
    buried = _report(capsys, "poison neighbours, standalone", redis_db, jids, killer, queued_then)
    assert queued_then >= 100
    assert not buried
    assert redis_db.llen("test:killer") == 3



def test_processes_1_buries_no_innocent(redis_db, worker_factory, capsys):
    jids, killer = _setup(redis_db, 1000)
    # The supervisor restarts the child each time the killer takes it down; the new child
    # recovers its dead sibling's jobs at boot, while hundreds of others are still queued.
    supervisor = worker_factory("--processes", "1", "-c", "10", env=FAST)
    wait_for(lambda: killer in _dead(redis_db), timeout=120, message="the killer to be poisoned")
    queued_then = redis_db.llen("queue:default")
    wait_for(lambda: _all_ran(redis_db, jids), timeout=60, message="every innocent job to run")
    assert supervisor.stop() == 0
    buried = _report(capsys, "poison neighbours, --processes 1", redis_db, jids, killer, queued_then)
    assert not buried
    assert redis_db.llen("test:killer") == 3
