"""Mixed fleets say so (issue 43 item 9), with a real Ruby Sidekiq 6.4 server process.

(a) A push of a job with ``kwargs`` or a result record to a queue a Ruby process
serves is warned about once per queue (and kind of loss) in each process; the
process set tells Ruby processes from ours. (b) A Celery-style task that the Ruby
process buries (``NameError: wrong constant name proj.tasks.fail``) gets its result record
marked FAILURE by the dead-set sweep of a Python worker's reaper.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import tempfile
import time

import pytest
from django.conf import settings

from tests.celery_compat.tasks import fail, greet
from tests.jobsapp.jobs import RecordJob
from tests.support import stop_process, wait_for
from tests.test_ruby_interop import _ruby_sidekiq_available
from wurk_django import fleet, keys, payload
from wurk_django.results import buried

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _ruby_sidekiq_available(), reason="Ruby sidekiq not installed (apt-get install ruby-sidekiq)"),
]


@pytest.fixture(autouse=True)
def _fresh_cache():
    fleet.CACHE.reset()
    yield
    fleet.CACHE.reset()


@pytest.fixture
def ruby_worker(redis_db):
    """``sidekiq -q mixed``: a real Ruby Sidekiq server on the test database, stopped by pid."""
    boot = tempfile.NamedTemporaryFile("w", suffix=".rb", delete=False)
    boot.write('require "sidekiq"\n')
    boot.close()
    log = tempfile.NamedTemporaryFile(prefix="sidekiq-", suffix=".log", delete=False)
    proc = subprocess.Popen(["sidekiq", "-r", boot.name, "-q", "mixed", "-c", "1"], stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True,
                            env={"REDIS_URL": settings.WURK_TEST_REDIS_URL, "PATH": "/usr/bin:/bin"})

    def entry() -> str | None:
        for member in redis_db.smembers(keys.PROCESSES):
            info = redis_db.hget(member, "info")
            if info and json.loads(info).get("pid") == proc.pid:
                return member.decode()
        return None

    try:
        identity = wait_for(entry, timeout=60, message="the Ruby process's heartbeat")
        yield proc, identity
    finally:
        stop_process(proc, signal.SIGTERM, 15)
        os.unlink(boot.name)


def _warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "wurk_django.client.push" and r.levelno == logging.WARNING
            and "Ruby process" in r.getMessage()]


def test_a_push_with_kwargs_or_a_result_to_a_ruby_served_queue_is_warned_about_once(redis_db, ruby_worker, caplog):
    _proc, identity = ruby_worker
    info = json.loads(redis_db.hget(identity, "info"))
    assert "runtime" not in info and info["queues"] == ["mixed"]  # as Sidekiq 6.4 writes it
    caplog.set_level(logging.WARNING, logger="wurk_django.client.push")
    RecordJob.set(queue="mixed").perform_async("plain")  # args only: nothing is lost
    assert _warnings(caplog) == []
    greet.apply_async(("ann",), {"greeting": "hey"}, queue="other")  # no Ruby process serves it
    assert _warnings(caplog) == []
    for _ in range(3):
        greet.apply_async(("ann",), {"greeting": "hey"}, queue="mixed")
    [kwargs, result] = _warnings(caplog)
    assert "'mixed'" in kwargs and identity in kwargs and "kwargs" in kwargs
    assert "'mixed'" in result and identity in result and "result record" in result


def test_plain_pushes_never_read_the_process_set(redis_db):
    # The common case costs nothing: no kwargs and no result record, no look at all.
    for n in range(50):
        RecordJob.perform_async(n)
    assert fleet.CACHE._queues == {}


def test_our_own_processes_are_not_taken_for_ruby():
    ours = payload.dumps({"queues": ["default"], "runtime": "wurk_django"})
    theirs = payload.dumps({"queues": ["default", "mailers"], "tag": "rails"})
    assert fleet.ruby_queues([("py:1:a", ours), ("rb:2:b", theirs), ("gone:3:c", None)]) == {
        "default": "rb:2:b", "mailers": "rb:2:b"}


def test_a_task_a_ruby_process_buries_reads_failure(redis_db, ruby_worker, worker_factory):
    proc, _identity = ruby_worker
    result = fail.apply_async((1, "never runs here"), queue="mixed")  # retry 0: Ruby buries it at once
    assert result.state == "PENDING"
    dead = wait_for(lambda: redis_db.zrange(keys.DEAD, 0, -1), timeout=30, message="Ruby to bury the task")
    entry = json.loads(dead[0])
    assert entry["jid"] == result.id and entry["error_class"] == "NameError"
    assert result.state == "PENDING"  # Ruby did not touch the record
    # A Python worker (another queue) sweeps the dead set on its reaper's interval.
    worker_factory("-c", "1", "-q", "pyonly",
                   env={"WURK_TEST_EXTRA": json.dumps({"SUPER_FETCH_REAPER_INTERVAL": 1})})
    wait_for(lambda: result.state == "FAILURE", timeout=buried.SETTLE + 30, message="the record to read FAILURE")
    assert result.traceback.startswith("NameError: wrong constant name proj.tasks.fail")  # Ruby's own error
    assert redis_db.hget(f"status:{result.id}", "state") == b"failed"  # the one vocabulary: dead is failed
    assert float(redis_db.get(keys.BURIED_SWEPT)) <= time.time()
