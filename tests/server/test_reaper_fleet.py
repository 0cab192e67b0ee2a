"""The reaper in a fleet shared with Ruby wurk (issue 26 item 3): whoever holds the
shared ``super_fetch:reaper`` lock, orphans of every queue come back within a few
intervals, not only those of the queues the lock holder serves. Real worker
processes on the test database."""

from __future__ import annotations

import json

import pytest

from tests.support import wait_for
from wurk_django import keys, payload
from wurk_django.server.reaper import LOCK_MARK

pytestmark = pytest.mark.slow

FAST = {"SUPER_FETCH_REAPER_INTERVAL": 1, "REAPER_ORPHAN_GRACE": 1}


def _orphan(redis_db, queue: str, value: str) -> str:
    """A private list of a process on another host whose heartbeat has lapsed."""
    name = f"queue:{queue}|elsewhere|4242|0123456789ab|0"
    job = {"class": "MyApp::RubyOnly", "args": [value], "jid": payload.new_jid(), "queue": queue,
           "created_at": payload.now_ms()}
    redis_db.rpush(name, payload.dumps(job))
    return name


def _start(worker_factory, queue: str):
    return worker_factory("-c", "1", "-q", queue, env={"WURK_TEST_EXTRA": json.dumps(FAST)})


def _beating(redis_db) -> bool:
    return any(redis_db.hget(m, "info") for m in redis_db.smembers(keys.PROCESSES))


def test_the_lock_holder_sweeps_a_queue_only_another_runtime_serves(redis_db, worker_factory):
    # The hourly full sweep ran a moment ago (say, on a Ruby process): only the interval
    # sweep can bring back an orphan of a queue no Python process serves.
    redis_db.set(keys.REAPER_FULL_LOCK, 1, ex=3600)
    worker = _start(worker_factory, "pyonly")
    wait_for(lambda: _beating(redis_db), timeout=60, message="the worker's first beat")
    orphan = _orphan(redis_db, "rubyonly", "stranded")
    wait_for(lambda: redis_db.llen("queue:rubyonly") == 1, timeout=60,
             message="the Ruby queue's orphan to come back")
    assert not redis_db.exists(orphan)
    assert payload.loads(redis_db.lindex("queue:rubyonly", 0))["args"] == ["stranded"]
    assert redis_db.get(keys.REAPER_LOCK) in (None, LOCK_MARK.encode())
    assert worker.alive()


def test_our_queues_are_swept_while_a_ruby_process_holds_the_lock(redis_db, worker_factory):
    # Ruby wurk writes "1" into the shared lock and sweeps only the queues it serves.
    redis_db.set(keys.REAPER_LOCK, "1", ex=3600)
    redis_db.set(keys.REAPER_FULL_LOCK, 1, ex=3600)
    worker = _start(worker_factory, "pyonly")
    wait_for(lambda: _beating(redis_db), timeout=60, message="the worker's first beat")
    ours = _orphan(redis_db, "elsewhere_py", "ours")
    theirs = _orphan(redis_db, "rubyonly", "theirs")
    # Waited for on the queues, not on the orphans' lists: a job can sit a moment in a
    # held list between the two (the reaper's suspect release), neither here nor there.
    wait_for(lambda: redis_db.llen("queue:elsewhere_py") == 1 and redis_db.llen("queue:rubyonly") == 1,
             timeout=60, message="both orphans to come back")
    assert not redis_db.exists(ours) and not redis_db.exists(theirs)
    assert redis_db.get(keys.REAPER_LOCK) == b"1"  # the Ruby holder's lock is left alone
    assert worker.alive()
