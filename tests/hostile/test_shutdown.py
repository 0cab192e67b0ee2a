"""Issue 12, items 13 and 14: the hard stop deregisters; shutdown messages say what happened."""

from __future__ import annotations

import json
import signal
import time

import pytest

from tests.jobsapp.jobs import LoopJob, RecordJob, SlowJob
from tests.support import wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_second_signal_still_removes_the_process_entry(redis_db, worker_factory, sig):
    jid = SlowJob.perform_async(60, "stuck")
    worker = worker_factory("-c", "1", "-t", "30")
    wait_for(lambda: redis_db.llen("test:started") == 1, message="the slow job")
    wait_for(lambda: redis_db.scard("processes") == 1, message="the process entry")
    worker.signal(sig)
    time.sleep(1)
    worker.signal(sig)
    worker.wait(timeout=10)
    assert redis_db.scard("processes") == 0
    assert not [k for k in redis_db.scan_iter("*") if b":" in k and redis_db.type(k) == b"hash"
                and redis_db.hexists(k, "beat")]
    assert [json.loads(j)["jid"] for j in redis_db.lrange("queue:default", 0, -1)] == [jid]


def test_job_put_back_at_shutdown_is_not_logged_as_a_failure(redis_db, worker_factory):
    jid = LoopJob.perform_async(60, "stuck")
    worker = worker_factory("-c", "1", "-t", "1")
    wait_for(lambda: redis_db.llen("test:started") == 1, message="the slow job")
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=20) == 0
    lines = [line for line in worker.output().splitlines() if f"jid={jid}" in line]
    assert not [line for line in lines if "INFO: fail" in line], lines
    assert any("INFO: requeued" in line for line in lines), lines
    assert [json.loads(j)["jid"] for j in redis_db.lrange("queue:default", 0, -1)] == [jid]


def test_burst_ends_with_a_true_message(redis_db, worker_factory):
    RecordJob.perform_async(1)
    worker = worker_factory("--burst", "-c", "1")
    assert worker.wait(timeout=30) == 0
    out = worker.output()
    assert "TERM received" not in out
    assert "queues are empty" in out


def test_embedded_mode_gives_its_job_lines_somewhere(monkeypatch):
    # Item 14: under gunicorn nothing configures wurk's loggers, so every job line was dropped.
    import logging

    from wurk_django.conf import Config
    from wurk_django.embed.embedded import ensure_log_output

    wurk = logging.getLogger("wurk_django")
    job = logging.getLogger("wurk_django.job")
    root = logging.getLogger()
    monkeypatch.setattr(wurk, "handlers", [])
    monkeypatch.setattr(wurk, "level", logging.NOTSET)
    monkeypatch.setattr(wurk, "propagate", True)
    monkeypatch.setattr(job, "level", logging.NOTSET)
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", logging.WARNING)
    assert not job.isEnabledFor(logging.INFO)  # what a web server leaves
    assert ensure_log_output(Config({}))
    assert job.isEnabledFor(logging.INFO) and len(wurk.handlers) == 1
    assert not ensure_log_output(Config({}))  # configured now: left alone


def test_embedded_mode_respects_a_project_logging_config(monkeypatch):
    import logging

    from wurk_django.conf import Config
    from wurk_django.embed.embedded import ensure_log_output

    wurk = logging.getLogger("wurk_django")
    monkeypatch.setattr(wurk, "handlers", [])
    monkeypatch.setattr(wurk, "level", logging.ERROR)  # the project chose this
    assert not ensure_log_output(Config({}))
    assert wurk.handlers == []
