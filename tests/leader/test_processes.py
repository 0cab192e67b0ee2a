"""Leader election in real worker processes."""

from __future__ import annotations

import json
import time

from tests.periodic.test_processes import LEADER
from tests.support import wait_for


def test_wurk_leader_false_never_leads(redis_db, worker_factory):
    # ENT-307: an opted-out process never campaigns, even alone
    env = {"WURK_TEST_EXTRA": json.dumps({"LEADER": LEADER}), "WURK_LEADER": "false"}
    worker = worker_factory("-c", "1", env=env)
    wait_for(lambda: redis_db.scard("processes") == 1, timeout=30, message="the worker to beat")
    time.sleep(1.5)
    assert redis_db.get("dear-leader") is None
    assert worker.stop() == 0
    assert "never leads" in worker.output()
