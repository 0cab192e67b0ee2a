"""Leader election in real worker processes."""

from __future__ import annotations

import json
import signal
import time

from tests.periodic.test_processes import LEADER
from tests.support import wait_for


def test_wurk_leader_false_never_leads(redis_db, worker_factory):
    """ENT-307: an opted-out process never campaigns, even alone. ENT-309: what is not
    gated on the lead still runs there: the scheduled poller and the orphan reaper; and
    RUN-144: the job metrics flusher, never leader-only."""
    from tests.jobsapp.jobs import RecordJob
    from tests.server.test_reaper_fleet import FAST, _orphan

    env = {"WURK_TEST_EXTRA": json.dumps({"LEADER": LEADER, **FAST}), "WURK_LEADER": "false"}
    worker = worker_factory("-c", "1", env=env)
    wait_for(lambda: redis_db.scard("processes") == 1, timeout=30, message="the worker to beat")
    RecordJob.perform_in(1, "scheduled")
    orphan = _orphan(redis_db, "elsewhere_py", "orphan")
    time.sleep(1.5)
    assert redis_db.get("dear-leader") is None
    wait_for(lambda: redis_db.lrange("test:ran", 0, -1) == [b"scheduled"], timeout=30,
             message="the scheduled job to run")
    wait_for(lambda: redis_db.llen("queue:elsewhere_py") == 1, timeout=30, message="the orphan to come back")
    assert not redis_db.exists(orphan)

    def metrics_flushed():
        return any(redis_db.hget(key, "tests.jobsapp.jobs.RecordJob|p") for key in redis_db.scan_iter(match="j|*"))

    wait_for(metrics_flushed, timeout=30, message="the job's metrics to be flushed")
    assert redis_db.get("dear-leader") is None
    assert worker.stop() == 0
    assert "never leads" in worker.output()


def test_ent_309_a_quiet_leader_keeps_the_lead_and_fires_cron_and_a_stop_releases_it(redis_db, worker_factory):
    """ENT-309: quiet (TSTP) does not step a leader down: it keeps its lock past several
    TTLs and its cron poller keeps firing; only the stop releases the lock."""
    from tests.periodic.test_processes import EVERY_MINUTE, fires, lids

    env = {"WURK_TEST_EXTRA": json.dumps({"LEADER": LEADER, "PERIODIC": [EVERY_MINUTE]}),
           "WURK_TEST_CLOCK": f"{time.time():.3f},12"}  # a cron minute in 5 s
    worker = worker_factory("-c", "1", env=env)
    leader = wait_for(lambda: redis_db.get("dear-leader"), timeout=30, message="the worker to lead")
    identity = leader.decode()
    assert f":{worker.pid}:" in identity
    wait_for(lambda: lids(redis_db), timeout=10, message="the loop")
    tick = next(iter(lids(redis_db).values()))
    worker.signal(signal.SIGTSTP)
    wait_for(lambda: redis_db.hget(identity, "quiet") == b"true", timeout=30, message="the worker to be quiet")
    count = len(fires(redis_db, tick))
    wait_for(lambda: len(fires(redis_db, tick)) > count, timeout=30, message="a tick fired while quiet")
    assert redis_db.get("dear-leader") == leader  # still ours, though its TTL is 1 s
    assert worker.stop() == 0
    assert redis_db.get("dear-leader") is None
