"""A worker restarted on the same host takes its predecessor's jobs back at once (issue 43 item 7).

A restarted process used to skip its predecessor's private lists while that
heartbeat was under 20 s old, then wait for the 60 s reaper pass. Now a process
whose heartbeat names this host and this pid scope (boot id and pid namespace,
``wurk_django.server.pidspace``) is judged by its pid: gone, or reused by a process
that started at another time, and its lists come back at boot. Other hosts, and
this host under another scope (another container), keep the heartbeat rules.
Real worker processes on the test database; the reaper interval is the default
60 s, so nothing here waits for a reaper pass.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from tests.jobsapp.jobs import SlowJob
from tests.support import beating, wait_for
from wurk_django import keys, payload
from wurk_django.server import pidspace
from wurk_django.server.state import hostname

pytestmark = pytest.mark.slow

KILLS = 3
RUN = 3.0  # seconds a job runs: long enough to be killed mid-run, short enough to finish before the next kill


def _report(capsys, title: str, **figures) -> None:
    with capsys.disabled():
        print(f"\n[{title}] " + ", ".join(f"{k}={v}" for k, v in figures.items()))


def _starts(redis_db) -> list[str]:
    return [raw.decode() for raw in redis_db.lrange("test:started", 0, -1)]


def _finished(redis_db) -> list[str]:
    return [raw.decode() for raw in redis_db.lrange("test:finished", 0, -1)]


def test_pidspace_tells_a_gone_or_reused_pid():
    assert pidspace.scope() is not None  # Linux, /proc mounted: what CI runs on
    me = os.getpid()
    assert not pidspace.gone(me, pidspace.started(me))
    assert pidspace.gone(me, pidspace.started(me) + 1)  # the same pid, another process
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert pidspace.gone(child.pid, None)


def test_a_restarted_worker_runs_its_killed_predecessors_jobs_within_seconds(redis_db, worker_factory, capsys):
    """RUN-206: a hard kill's in-flight jobs run again from their start; on the same host
    the restarted sibling takes them back at its boot (elsewhere: the reaper, in
    tests/server/test_reaper.py; the other accepted costs are in docs/reliability.md)."""
    # Each kill interrupts jobs of its own: a job interrupted by a second crash is a
    # poison-pill suspect, given back alone once per reaper interval (docs/reliability.md).
    recoveries, boots = [], []
    worker = worker_factory("-c", "4", "-q", "restart")
    for kill in range(KILLS):
        markers = [f"k{kill}-{i}" for i in range(3)]
        for marker in markers:
            SlowJob.set(queue="restart").perform_async(RUN, marker)
        wait_for(lambda: all(m in _starts(redis_db) for m in markers), timeout=30, message="the jobs to start")
        wait_for(lambda: beating(redis_db, worker.pid), timeout=30, message="the worker's heartbeat")
        worker.kill()  # SIGKILL mid-job, reaped by pid
        killed_at = time.monotonic()
        assert not any(m.startswith(f"k{kill}-") for m in _finished(redis_db))
        worker = worker_factory("-c", "4", "-q", "restart")  # the process manager restarts it at once
        wait_for(lambda: beating(redis_db, worker.pid), timeout=30, message="the new worker's heartbeat")
        boots.append(round(time.monotonic() - killed_at, 2))
        wait_for(lambda: all(_starts(redis_db).count(m) == 2 for m in markers), timeout=30,
                 message="the killed worker's jobs to run again")
        recoveries.append(round(time.monotonic() - killed_at, 2))
        wait_for(lambda: all(m in _finished(redis_db) for m in markers), timeout=30, message="the jobs to finish")
    _report(capsys, "kill -9, restarted at once on the same host", kills=KILLS, jobs_in_flight_per_kill=3,
            seconds_to_first_beat=boots, seconds_to_jobs_running_again=recoveries)
    assert max(recoveries) < 20  # the heartbeat-age rule would have taken over 20 s, plus the reaper pass


def _fake_process(redis_db, host: str, pid: int, scope: str | None, started: int | None, queue: str) -> str:
    """A heartbeat as a live-looking process writes it (beat just now), and one job in its private list."""
    nonce = os.urandom(6).hex()
    identity = f"{host}:{pid}:{nonce}"
    info = {"hostname": host, "pid": pid, "identity": identity, "queues": [queue], "concurrency": 1,
            "runtime": "wurk_django"}
    if scope is not None:
        info.update(pid_scope=scope, pid_started=started)
    redis_db.sadd(keys.PROCESSES, identity)
    redis_db.hset(identity, mapping={"info": payload.dumps(info), "beat": repr(time.time()), "busy": 1})
    redis_db.expire(identity, 60)
    job = {"class": "tests.jobsapp.jobs.RecordJob", "args": [identity], "jid": payload.new_jid(), "queue": queue,
           "retry": True, "created_at": payload.now_ms(), "enqueued_at": payload.now_ms()}
    private = keys.private_queue(queue, host, pid, nonce, 0)
    redis_db.lpush(private, payload.dumps(job))
    return private


def test_only_gone_processes_of_this_host_and_pid_scope_are_taken_early(redis_db, worker_factory):
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    dead, me, scope = child.pid, os.getpid(), pidspace.scope()
    # Taken at once, on a queue the new worker does not even serve: a gone pid, and a
    # pid now held by another process (this test's) that started at another time.
    gone = _fake_process(redis_db, hostname(), dead, scope, 12345, "elsewhere")
    reused = _fake_process(redis_db, hostname(), me, scope, pidspace.started(me) - 1, "elsewhere")
    # Left to the heartbeat rules: another host (its pid means nothing here, even with our
    # scope), this host under another scope (another container), and no scope recorded.
    remote = _fake_process(redis_db, "another-host", dead, scope, 12345, "restart")
    container = _fake_process(redis_db, hostname(), dead, "0-other-boot/4026531836", 12345, "restart")
    older = _fake_process(redis_db, hostname(), dead, None, None, "restart")
    worker = worker_factory("-c", "2", "-q", "restart")
    wait_for(lambda: redis_db.llen("queue:elsewhere") == 2, timeout=30, message="this host's gone processes' jobs")
    assert not redis_db.exists(gone) and not redis_db.exists(reused)
    wait_for(lambda: beating(redis_db, worker.pid), timeout=30, message="the worker's heartbeat")
    time.sleep(2)  # the boot sweep of the worker's own queue has run by now
    for private in (remote, container, older):
        assert redis_db.llen(private) == 1, private
    assert redis_db.llen("test:ran") == 0  # RecordJob: none of them ran on "restart"
    assert worker.alive()
