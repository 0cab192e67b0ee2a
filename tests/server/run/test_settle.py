"""One settlement per run, in real worker processes (issue 41 item 1, issue 43 item 1).

A job stopped by its hard time limit is settled once, by the watchdog, through the
same code as any other run: it counts in ``stat:failed`` and the job metrics, and
its job log has an end line. Its thread, when it comes back late, changes nothing.
Abandoning a thread gives back what it held (its fetch slot, that slot's pooled
connection), so the worker keeps its full concurrency however
many threads sleep abandoned; past a limit of them it restarts itself cleanly.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request

import pytest

from tests.jobsapp.limit_jobs import HoldsLease, LateWaker, Stuck, Tick, WantsLease
from tests.local_redis import free_port
from tests.support import wait_for

pytestmark = pytest.mark.slow

SETTINGS = "tests.server.run.abandon_settings"


def _recorded(redis_db) -> list[str]:
    return [item.decode() for item in redis_db.lrange("test:limits", 0, -1)]


def _dead(redis_db) -> dict[str, bytes]:
    return {json.loads(raw)["jid"]: raw for raw in redis_db.zrange("dead", 0, -1)}


def _stat(redis_db, name: str) -> int:
    return int(redis_db.get(f"stat:{name}") or 0)


def _failures_in_metrics(redis_db, job_class: str) -> int:
    """Failures of ``job_class`` in the per-minute metrics keys (``j|YYMMDD|H:MM``)."""
    total = 0
    for key in redis_db.scan_iter("j|*"):
        if len(key.decode().rsplit(":", 1)[-1]) == 2:  # the minute keys, not the ten-minute ones
            total += int(redis_db.hget(key, f"{job_class}|f") or 0)
    return total


def _end_lines(output: str, jid: str) -> list[str]:
    return [line.rsplit(": ", 1)[-1] for line in output.splitlines()
            if f"jid={jid}" in line and "INFO: " in line
            and line.rsplit(": ", 1)[-1] in ("done", "fail", "requeued", "rescheduled")]


def _live(port: int) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/live", timeout=5) as reply:
            return reply.status, json.loads(reply.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read())


def test_hard_limited_jobs_count_log_and_stay_settled_when_their_threads_wake_rule_issue_41_item_1(
        redis_db, worker_factory):
    """Three jobs past their hard limit: dead, counted in stat:failed and the job metrics, a
    ``fail`` end line each; when their sleeps return and the jobs return normally, nothing
    changes (no success counted, no second line, the dead entries as they were)."""
    jids = [LateWaker.perform_async(f"late{n}", 4) for n in range(3)]
    worker = worker_factory("-c", "3")
    wait_for(lambda: set(jids) <= set(_dead(redis_db)), timeout=60, message="the three jobs in the dead set")
    dead_before = {jid: raw for jid, raw in _dead(redis_db).items() if jid in jids}
    # The abandoned threads wake (their sleeps return) and their jobs return normally.
    wait_for(lambda: sum(r.endswith(":woke") for r in _recorded(redis_db)) == 3, timeout=30,
             message="the three abandoned threads woke")
    time.sleep(1.0)  # their processors are back from the job: whatever they would settle, they did
    assert worker.stop() == 0  # the final stat flush happens on the way out
    output = worker.output()
    for jid in jids:
        assert dead_before[jid] == _dead(redis_db)[jid]  # unchanged after the thread woke
        assert _end_lines(output, jid) == ["fail"], output
        entry = json.loads(dead_before[jid])
        assert entry["error_class"] == "wurk_django.errors.HardTimeLimitExceeded"
    assert redis_db.zcard("retry") == 0 and redis_db.llen("queue:default") == 0
    assert _stat(redis_db, "failed") == 3 and _stat(redis_db, "processed") == 3
    assert _failures_in_metrics(redis_db, "tests.jobsapp.limit_jobs.LateWaker") == 3
    assert all(redis_db.llen(key) == 0 for key in redis_db.scan_iter("queue:default|*"))
    assert output.count("came back after its thread was abandoned") == 3  # each late outcome dropped


def test_thirty_abandoned_threads_leave_full_concurrency_issue_43_item_1(redis_db, worker_factory):
    """``-c 10``, 30 jobs blocked in ``time.sleep(300)`` past ``time_limit=1`` (more abandoned
    threads than the fetch pool's concurrency + 2 connections), then 100 one-call jobs: all
    100 run while the 30 threads still sleep, and ``/live`` stays up."""
    port = free_port()
    for _ in range(30):
        Stuck.perform_async(300)
    worker = worker_factory("-c", "10", "--health-port", str(port), settings=SETTINGS,
                            env={"TEST_ABANDONED_LIMIT": "64"})
    wait_for(lambda: redis_db.zcard("dead") == 30, timeout=40, message="the 30 stuck jobs abandoned and settled")
    for n in range(100):
        Tick.perform_async(n)
    wait_for(lambda: redis_db.llen("test:ticks") == 100, timeout=20, message="the 100 jobs after the abandonments")
    assert worker.output().count("its thread is abandoned and replaced") == 30
    assert "stuck:woke" not in _recorded(redis_db)  # the 30 threads still sleep
    assert "No connection available" not in worker.output()
    assert _live(port)[0] == 200
    assert worker.alive()


def test_past_the_abandoned_limit_the_worker_restarts_cleanly_issue_43_item_1(redis_db, worker_factory):
    """Four threads stuck with a limit of three: the worker says why and stops cleanly (exit 0,
    for its supervisor to start a fresh one)."""
    for _ in range(4):
        Stuck.perform_async(300)
    worker = worker_factory("-c", "2", settings=SETTINGS, env={"TEST_ABANDONED_LIMIT": "3"})
    assert worker.wait(timeout=40) == 0
    output = worker.output()
    [line] = [line for line in output.splitlines() if "abandoned job threads are still stuck" in line]
    assert "past the limit of 3 (ABANDONED_THREADS_LIMIT)" in line and "restarting the worker" in line
    assert re.search(r"worker \S+ stopped", output), output  # a clean stop, not a crash
    assert redis_db.zcard("dead") == 4 and redis_db.llen("queue:default") == 0


def test_an_abandoned_thread_gives_its_limiter_slot_back_at_once_issue_43_item_1(redis_db, worker_factory):
    """A job holding a concurrent limiter's only slot is abandoned in ``time.sleep(300)``: the
    slot comes back with the abandonment, so the next job that asks gets it (it would
    otherwise wait for the slot's ``lock_timeout``, ten minutes)."""
    HoldsLease.perform_async("test-lease", 300)
    worker = worker_factory("-c", "2")
    wait_for(lambda: redis_db.zcard("dead") == 1, timeout=30, message="the lease holder abandoned and settled")
    WantsLease.perform_async("test-lease", 5)
    wait_for(lambda: any(r.startswith("lease:") for r in _recorded(redis_db)), timeout=30,
             message="the next job's answer")
    assert "lease:taken" in _recorded(redis_db)
    assert worker.alive()


def test_live_fails_once_the_process_is_past_its_abandoned_limit_issue_43_item_1():
    """``/live`` answers 503 with the reason once more threads than the limit are abandoned and
    still stuck (the process restarts itself then); threads that unwound do not count."""
    import threading
    import types

    from wurk_django.conf import Config
    from wurk_django.metrics.tracker import MetricsTracker
    from wurk_django.server.health import HealthListener
    from wurk_django.server.run.manager import Manager
    from wurk_django.server.state import WorkerState

    config = Config(queues=["default"], concurrency=2, abandoned_threads_limit=2)
    restarts: list[str] = []
    manager = Manager(config, WorkerState(), MetricsTracker(config),
                      request_shutdown=lambda: restarts.append("asked"))
    launcher = types.SimpleNamespace(stopped=threading.Event(), stopping=False, quieting=False,
                                     managers=[manager])
    listener = HealthListener(launcher, 0)
    release = threading.Event()
    stuck = [threading.Thread(target=release.wait, daemon=True) for _ in range(3)]
    for thread in stuck:
        thread.start()
    try:
        unwound = threading.Thread(target=lambda: None)
        unwound.start()
        unwound.join()
        manager._abandoned = [*stuck[:2], unwound]  # two still stuck: within the limit
        manager._check_abandoned()
        assert listener.live() == (True, []) and restarts == []
        manager._abandoned.append(stuck[2])  # three stuck, past the limit of two
        manager._check_abandoned()
        assert restarts == ["asked"]
        ok, reasons = listener.live()
        assert not ok and reasons == ["restarting: 3 abandoned job threads are still stuck, past the limit of 2 "
                                      "(ABANDONED_THREADS_LIMIT)"]
        manager._check_abandoned()
        assert restarts == ["asked"]  # asked once
    finally:
        release.set()
