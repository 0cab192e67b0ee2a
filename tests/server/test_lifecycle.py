"""Worker lifecycle events in a real worker process (issue 31 item 2: CORE-154, RUN-111,
RUN-141, RUN-110) and a dying thread reaching the error handlers (RUN-101)."""

from __future__ import annotations

import signal
import threading

import pytest

from tests.support import wait_for

pytestmark = pytest.mark.slow

SETTINGS = "tests.server.settings_ops"


def _worker(worker_factory, mode: str):
    env = {"WURK_TEST_PROBE_MODULE": "tests.server.lifecycle_hooks", "WURK_TEST_HOOKS": mode}
    return worker_factory("-c", "2", env=env, settings=SETTINGS)


def _events(redis_db) -> list[str]:
    return [item.decode() for item in redis_db.lrange("test:lifecycle", 0, -1)]


def test_events_fire_in_order_startup_before_threads_teardown_newest_first(redis_db, worker_factory):
    worker = _worker(worker_factory, "record")
    wait_for(lambda: "beat:b" in _events(redis_db), timeout=60, message="a first beat")
    worker.signal(signal.SIGTSTP)  # quiet wakes the heartbeat: a second beat
    wait_for(lambda: _events(redis_db).count("beat:a") >= 2, timeout=60, message="a second beat")
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0
    events = _events(redis_db)
    # startup in connection order, before any processor thread exists
    assert events[:2] == ["startup:a:0", "startup:b:0"], events
    # heartbeat once (the process appeared in Redis), beat after every beat, in connection order
    assert [e for e in events if e.startswith("heartbeat")] == ["heartbeat:a", "heartbeat:b"], events
    assert events.index("heartbeat:b") < events.index("beat:a")
    assert events.count("beat:a") == events.count("beat:b") >= 2
    # quiet, shutdown and exit newest receiver first; exit once deregistered
    teardown = [e for e in events if e.split(":")[0] in ("quiet", "shutdown", "exit")]
    assert teardown == ["quiet:b", "quiet:a", "shutdown:b", "shutdown:a", "exit:b:0", "exit:a:0"], events
    assert redis_db.scard("processes") == 0


def test_a_raising_startup_receiver_aborts_the_boot_with_nothing_registered(redis_db, worker_factory):
    worker = _worker(worker_factory, "fail-startup")
    assert worker.wait(timeout=60) == 1
    output = worker.output()
    assert "worker_startup receiver startup_a failed: RuntimeError: the license server said no" in output
    assert "not starting" in output
    assert " started: " not in output  # the launcher's "worker ... started" line
    assert _events(redis_db) == ["startup:a:0"]  # startup_b never ran, no thread ever started
    assert redis_db.scard("processes") == 0
    assert not redis_db.keys("*:*:*")  # no identity hash, work hash or signals list


def test_a_failed_start_stops_what_started_and_deregisters(redis_db, worker_factory):
    worker = _worker(worker_factory, "fail-component")
    assert worker.wait(timeout=60) != 0
    output = worker.output()
    assert "component refused to start" in output
    events = _events(redis_db)
    assert "listed-before-failing:1" in events, events  # it was registered when the start failed
    assert "exit:a:0" in events, events  # the guarded stop ran the teardown to the end
    assert redis_db.scard("processes") == 0
    assert not redis_db.keys("*:*:*")


def test_a_dying_thread_reaches_the_error_handlers():
    from wurk_django.server.threads import spawn

    seen = []

    class Config:
        error_handlers = [lambda exc, ctx, config: seen.append((type(exc).__name__, str(exc), ctx))]

    def boom():
        raise KeyError("lost")

    spawn("test/processor", boom, Config()).join(10)
    assert seen == [("KeyError", "'lost'", {"context": "thread test/processor died", "thread": "test/processor"})]
    assert not [t for t in threading.enumerate() if t.name == "test/processor"]


def test_heartbeat_fires_once_per_registration_and_a_failed_beat_rearms_it(redis_db, monkeypatch):
    # RUN-141 / CORE-154: `heartbeat` when the entry was absent, at most once, armed again by a
    # failed beat; `beat` after every successful one.
    import redis as redis_lib

    from wurk_django import signals
    from wurk_django.conf import Config
    from wurk_django.server import heartbeat as heartbeat_module
    from wurk_django.server.launcher import Launcher

    seen: list[str] = []

    def on_heartbeat(sender, launcher, **kwargs):
        seen.append("heartbeat")

    def on_beat(sender, launcher, **kwargs):
        seen.append("beat")

    signals.worker_heartbeat.connect(on_heartbeat)
    signals.worker_beat.connect(on_beat)
    launcher = Launcher(Config(), embedded=True)
    try:
        launcher.heartbeat.beat()
        launcher.heartbeat.beat()
        redis_db.delete(launcher.state.identity)  # gone, but no beat failed: not armed
        launcher.heartbeat.beat()
        assert seen == ["heartbeat", "beat", "beat", "beat"]

        real = heartbeat_module.get_redis

        def down(*args, **kwargs):
            raise redis_lib.ConnectionError("down")

        monkeypatch.setattr(heartbeat_module, "get_redis", down)
        with pytest.raises(redis_lib.ConnectionError):
            launcher.heartbeat.beat()
        monkeypatch.setattr(heartbeat_module, "get_redis", real)
        launcher.heartbeat.beat()  # the entry survived the outage: nothing to announce (still armed)
        redis_db.delete(launcher.state.identity)
        launcher.heartbeat.beat()  # gone at a later beat: announced again, once
        launcher.heartbeat.beat()
        assert seen == ["heartbeat", "beat", "beat", "beat", "beat", "heartbeat", "beat", "beat"]
    finally:
        signals.worker_heartbeat.disconnect(on_heartbeat)
        signals.worker_beat.disconnect(on_beat)
        launcher.heartbeat.clear()


def test_run_208_a_graceful_stop_flushes_stats_and_metrics_deregisters_and_releases_the_lead(
        redis_db, worker_factory):
    """RUN-208: jobs that ran just before a TERM are all counted (the ``stat:processed``
    counter, flushed every beat, and the per-class metrics, every few seconds: the stop
    flushes both), the process leaves ``processes`` and its keys, and the leader lock it
    held is released, not left to expire."""
    import json

    from tests.jobsapp.jobs import RecordJob
    from tests.periodic.test_processes import LEADER

    worker = worker_factory("-c", "2", env={"WURK_TEST_EXTRA": json.dumps({"LEADER": {**LEADER, "TTL": 60}})})
    identity = wait_for(lambda: redis_db.get("dear-leader"), timeout=30, message="the worker to lead").decode()
    for n in range(5):
        RecordJob.perform_async(f"r{n}")
    wait_for(lambda: redis_db.llen("test:ran") == 5, timeout=30, message="five jobs to run")
    worker.signal(signal.SIGTERM)
    assert worker.wait(30) == 0
    assert redis_db.get("stat:processed") == b"5"
    counted = sum(int(redis_db.hget(key, "tests.jobsapp.jobs.RecordJob|p") or 0)
                  for key in redis_db.scan_iter(match="j|*:[0-9][0-9]"))  # per-minute keys, not ten-minute
    assert counted == 5
    assert redis_db.scard("processes") == 0 and not redis_db.exists(identity, f"{identity}:work")
    assert redis_db.get("dear-leader") is None  # released: its TTL of 60 s has not run out
