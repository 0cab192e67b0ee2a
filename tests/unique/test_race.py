"""Unique jobs under a real race: 3 processes x 50 threads push one job at once (ENT-204, ENT-205)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from tests.support import ROOT, stop_process, wait_for, wurk_settings
from tests.unique.jobs import SyncAccount
from wurk_django.unique import locked

PROCESSES = 3
THREADS = 50
EXTRA = {"UNIQUE_JOBS": True, "IMPORT_ON_MISS": ["tests"], "POLL_INTERVAL_AVERAGE": 1}


def test_exactly_one_push_wins_then_the_next_is_accepted_after_success(redis_db, worker_factory):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "WURK_TEST_EXTRA": json.dumps(EXTRA)}
    racers = [subprocess.Popen([sys.executable, "-m", "tests.unique.racer", str(THREADS)], cwd=str(ROOT), env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(PROCESSES)]
    try:
        wait_for(lambda: redis_db.llen("test:race:ready") == PROCESSES, timeout=60, message="racers ready")
        redis_db.set("test:race:go", "1")
        results = []
        for proc in racers:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, err
            results += json.loads(out)
    finally:
        for proc in racers:
            stop_process(proc, signal.SIGTERM, 5)
    winners = [jid for jid in results if jid]
    assert len(results) == PROCESSES * THREADS
    assert len(winners) == 1, winners
    assert redis_db.llen("queue:default") == 1
    with wurk_settings(UNIQUE_JOBS=True):
        assert locked(SyncAccount, [4242]) == winners[0]
        assert SyncAccount.perform_async(4242) is None  # still pending: a duplicate

        worker_factory("-c", "2", env={"WURK_TEST_EXTRA": json.dumps(EXTRA)})
        wait_for(lambda: redis_db.lrange("test:synced", 0, -1) == [b"4242"], timeout=30, message="the job ran")
        wait_for(lambda: locked(SyncAccount, [4242]) is None, timeout=10, message="lock released after success")
        again = SyncAccount.perform_async(4242)
        assert again and again != winners[0]
        wait_for(lambda: redis_db.llen("test:synced") == 2, timeout=30, message="the second job ran")
