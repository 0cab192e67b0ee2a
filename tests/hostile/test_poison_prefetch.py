"""Issue 28, item 1: a poison pill buries no innocent job with fetching ahead on.

A pill (a job that SIGKILLs its own worker) sits among 1,000 short jobs; the worker
is restarted at once after each death, as systemd or Kubernetes would. Each thread
fetches jobs ahead and parks its ACKs, so a dead process's private lists hold jobs
that never started and jobs that had finished: neither is a suspect. Only the jobs
that were running when the process died get a crash count, and a job suspected
again comes back on its own, so the pill cannot drag the same neighbours down
with it three times.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from tests.jobsapp.jobs import KillerJob, TraceJob
from tests.support import wait_for

pytestmark = pytest.mark.slow

JOBS = 1000
FAST = {"WURK_TEST_EXTRA": json.dumps({"SUPER_FETCH_REAPER_INTERVAL": 1, "REAPER_ORPHAN_GRACE": 0})}
NAMED = re.compile(r"\(jid (\w+)\) was running when process (\d+) died")


def _dead(redis_db) -> dict:
    return {json.loads(d).get("jid"): json.loads(d) for d in redis_db.zrange("dead", 0, -1)}


@pytest.mark.parametrize("concurrency,seconds", [(10, 0.02), (10, 0.002), (25, 0.02), (25, 0.002)])
def test_pill_fetched_ahead_with_restarts_buries_no_innocent(redis_db, worker_factory, concurrency, seconds):
    # These jobs wait rather than compute, so by themselves they would be marked by batch
    # (slot.QUICK is processor time; test_pill_among_quick_jobs_buries_no_innocent covers
    # that). Exact marks asked for with no TTL, as an operator may: each job is named as it
    # starts, among jobs fetched ahead, from every worker's boot on.
    redis_db.set("super_fetch:exact_marks", "1")
    jids = TraceJob.perform_bulk([[seconds]] * JOBS)
    pill = KillerJob.perform_async()
    # In the middle of the queue: every thread is busy and fetching ahead when it strikes.
    raw = redis_db.lpop("queue:default")
    redis_db.linsert("queue:default", "BEFORE", redis_db.lindex("queue:default", -(JOBS // 2)), raw)

    workers = []
    while pill not in _dead(redis_db):
        assert len(workers) <= 3, "the pill killed a fourth worker"
        worker = worker_factory("-c", str(concurrency), env=FAST)
        workers.append(worker)
        wait_for(lambda w=worker: not w.alive() or pill in _dead(redis_db), timeout=180,
                 message="the worker to die or the pill to be buried")
        if not worker.alive():
            # Its heartbeat dropped at once, as its TTL would later: the next worker reclaims now.
            for identity in redis_db.smembers("processes"):
                if f":{worker.pid}:".encode() in identity:
                    redis_db.delete(identity)
    def settled() -> bool:
        # Every job ran, and none waits any more: not queued, not held back as a suspect
        # (a job that finished just before a death may run again), not in a dead list.
        ran = not set(jids) - {r.decode() for r in redis_db.lrange("test:runs", 0, -1)}
        return ran and not redis_db.llen("queue:default") and not any(
            f"|{w.pid}|".encode() in key for w in workers[:-1] for key in redis_db.keys("queue:default|*"))

    wait_for(settled, timeout=240, message="every innocent job to run and none to wait")
    assert worker.stop() == 0

    dead = _dead(redis_db)
    assert set(dead) == {pill}, f"innocents buried: {sorted(set(dead) - {pill})}"
    assert redis_db.llen("test:killer") == 3
    assert "recovered 3 times" in dead[pill]["error_message"]

    # The reapers named, for each death, the job of each thread that was running: the pill
    # once per death, and never more jobs than threads. The jobs each thread fetched ahead
    # (about 10 a thread with 2 ms jobs) or finished with their ACK parked are not named.
    named = [(int(pid), jid) for w in workers for jid, pid in NAMED.findall(w.output())]
    victims = [int(pid) for pid in redis_db.lrange("test:killer", 0, -1)]
    assert sorted(pid for pid, jid in named if jid == pill) == sorted(victims)
    per_death = Counter(pid for pid, _ in named)
    assert set(per_death) == set(victims)
    assert max(per_death.values()) <= concurrency
    # No innocent keeps a crash count: those that were running finished since.
    assert not [jid for jid in jids if redis_db.exists(f"super_fetch:recovered:{jid}")]


def test_pill_among_quick_jobs_buries_no_innocent(redis_db, worker_factory):
    """Issue 48 item 5: jobs shorter than a millisecond are marked by batch, not one by one
    as they start, so the pill's death among them may name no job: then none is counted,
    and every worker names each job it starts from then on (super_fetch:exact_marks). The
    pill is buried at its third named death, one more than the three at most, and no
    innocent with it."""
    jids = TraceJob.perform_bulk([[0]] * JOBS)
    pill = KillerJob.perform_async()
    raw = redis_db.lpop("queue:default")
    redis_db.linsert("queue:default", "BEFORE", redis_db.lindex("queue:default", -(JOBS // 2)), raw)

    workers = []
    while pill not in _dead(redis_db):
        assert len(workers) <= 4, "the pill killed a fifth worker"
        worker = worker_factory("-c", "4", env=FAST)
        workers.append(worker)
        wait_for(lambda w=worker: not w.alive() or pill in _dead(redis_db), timeout=180,
                 message="the worker to die or the pill to be buried")
        if not worker.alive():
            for identity in redis_db.smembers("processes"):
                if f":{worker.pid}:".encode() in identity:
                    redis_db.delete(identity)

    def settled() -> bool:
        ran = not set(jids) - {r.decode() for r in redis_db.lrange("test:runs", 0, -1)}
        return ran and not redis_db.llen("queue:default") and not any(
            f"|{w.pid}|".encode() in key for w in workers[:-1] for key in redis_db.keys("queue:default|*"))

    wait_for(settled, timeout=240, message="every innocent job to run and none to wait")
    assert worker.stop() == 0

    dead = _dead(redis_db)
    assert set(dead) == {pill}, f"innocents buried: {sorted(set(dead) - {pill})}"
    assert "recovered 3 times" in dead[pill]["error_message"]
    deaths = redis_db.llen("test:killer")
    output = "".join(w.output() for w in workers)
    unnamed = output.count("marked by batch: none is counted")
    # Each death either named the pill or named no job at all (and asked for exact marks).
    named = [(int(pid), jid) for jid, pid in NAMED.findall(output)]
    victims = {int(pid) for pid in redis_db.lrange("test:killer", 0, -1)}
    pill_deaths = [pid for pid, jid in named if jid == pill]
    assert len(pill_deaths) == len(set(pill_deaths)) == 3 and set(pill_deaths) <= victims
    assert deaths in (3, 4) and (deaths == 3 or unnamed >= 1), (deaths, unnamed)
    assert not [jid for jid in jids if redis_db.exists(f"super_fetch:recovered:{jid}")]
