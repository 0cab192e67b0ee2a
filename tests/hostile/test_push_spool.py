"""Issue 43 item 2: a push that returned a jid runs, or the caller is told.

Real processes against a private redis-server (append-only, one port of
``WURK_TEST_PORTS``, stopped by pid): a short process pushes 20 jobs while that
Redis is down and exits; the server is started again on the same port and data
folder, and a real worker runs what arrives. Before the spool, 0 of the 20 ran.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import redis

from tests.redis_servers import free_port
from tests.support import ROOT, RedisServer, WorkerProcess, wait_for
from wurk_django.client import push_spool, reliable_push

pytestmark = pytest.mark.slow

PUSH_20 = """
import django
django.setup()
from tests.jobsapp.jobs import RecordJob
for n in range(20):
    print("PUSHED", RecordJob.perform_async(f"job-{n}"), flush=True)
"""


@pytest.fixture
def server():
    """A private Redis that keeps its data over a stop and a start (append-only)."""
    each = RedisServer()
    each.port = free_port()
    each.url = f"redis://127.0.0.1:{each.port}/0"
    yield each
    each.stop()


@pytest.fixture
def spool(tmp_path):
    folder = tmp_path / "spool"
    folder.mkdir(mode=0o700)
    return folder


def _env(server: RedisServer, spool: Path, **wurk) -> dict[str, str]:
    extra = {"REDIS_URL": server.url, "RELIABLE_PUSH_SPOOL": str(spool), "RELIABLE_PUSH_EXIT_WAIT": 0.5, **wurk}
    return {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "WURK_TEST_EXTRA": json.dumps(extra)}


def _run(script: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script], cwd=str(ROOT), env=env, capture_output=True, text=True,
                          timeout=120)


def _ran(server: RedisServer) -> list[str]:
    client = redis.Redis(port=server.port)
    try:
        return [raw.decode() for raw in client.lrange("test:ran", 0, -1)]
    finally:
        client.close()


def _spooled_while_down(server: RedisServer, spool: Path) -> tuple[list[str], subprocess.CompletedProcess]:
    """Start and stop the server (its port and folder stay), then push 20 jobs from a
    short process that exits while it is down."""
    server.start()
    server.stop()
    proc = _run(PUSH_20, _env(server, spool))
    jids = [line.split()[-1] for line in proc.stdout.splitlines() if line.startswith("PUSHED")]
    assert len(jids) == 20, proc.stderr[-3000:]
    return jids, proc


def test_twenty_jobs_pushed_while_redis_is_down_all_run_after_it_returns(server, spool):
    """The scenario of issue 43: 20 jids returned while Redis was down, the process
    exited; Redis returns and a worker boots. Before the spool: 0 of 20 ran."""
    jids, proc = _spooled_while_down(server, spool)
    # Told loudly: how many, where, and that nothing was lost (the process's own status).
    assert "20 job(s) not delivered before exit were saved to" in proc.stderr, proc.stderr[-3000:]
    assert str(spool) in proc.stderr
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list(spool.glob("*.spool"))) == 1

    server.start()
    worker = WorkerProcess("-c", "5", env=_env(server, spool))
    try:
        wait_for(lambda: len(_ran(server)) >= 20, timeout=30, message="the 20 spooled jobs to run")
        time.sleep(0.5)  # a duplicate would land now
        ran = _ran(server)
    finally:
        worker.stop()
    assert sorted(ran) == sorted(f"job-{n}" for n in range(20))  # 20 of 20, each once
    assert "re-pushed 20 job(s)" in worker.output()
    assert list(spool.iterdir()) == []  # the file is gone once its jobs are in Redis


def test_the_next_process_that_pushes_delivers_the_spool_first(server, spool):
    """No worker needed: the next process pushing to the same Redis re-pushes the
    file, ahead of its own job."""
    _spooled_while_down(server, spool)
    server.start()
    client = redis.Redis(port=server.port)
    try:
        proc = _run("import django\ndjango.setup()\nfrom tests.jobsapp.jobs import RecordJob\n"
                    "RecordJob.perform_async('later')\n", _env(server, spool))
        assert proc.returncode == 0, proc.stderr[-3000:]
        queued = [json.loads(raw)["args"][0] for raw in reversed(client.lrange("queue:default", 0, -1))]
    finally:
        client.close()
    assert queued == [f"job-{n}" for n in range(20)] + ["later"]  # oldest first, once each
    assert list(spool.iterdir()) == []


def test_a_spool_file_is_pushed_once_when_two_workers_boot_at_once(server, spool):
    _spooled_while_down(server, spool)
    server.start()
    workers = [WorkerProcess("-c", "5", env=_env(server, spool)) for _ in range(2)]
    try:
        wait_for(lambda: len(_ran(server)) >= 20, timeout=30, message="the 20 spooled jobs to run")
        time.sleep(1.0)  # a second push of the file would have run by now
        ran = _ran(server)
    finally:
        for worker in workers:
            worker.stop()
    assert sorted(ran) == sorted(f"job-{n}" for n in range(20))
    outputs = [worker.output() for worker in workers]
    assert sum("re-pushed 20 job(s)" in out for out in outputs) == 1, outputs


def test_a_spool_file_for_another_redis_is_left_alone(server, spool):
    _spooled_while_down(server, spool)
    other = RedisServer()
    other.port = free_port()
    other.url = f"redis://127.0.0.1:{other.port}/0"
    other.start()
    try:
        proc = _run("import django\ndjango.setup()\nfrom tests.jobsapp.jobs import RecordJob\n"
                    "RecordJob.perform_async('elsewhere')\n", _env(other, spool))
        assert proc.returncode == 0, proc.stderr[-3000:]
        client = redis.Redis(port=other.port)
        assert client.llen("queue:default") == 1  # its own job only
        client.close()
    finally:
        other.stop()
    assert len(list(spool.glob("*.spool"))) == 1  # still waiting for its own Redis


def test_a_corrupt_spool_file_is_moved_aside_and_the_worker_runs_on(server, spool):
    target = push_spool.target_key(_config(server))
    name = f"push-{push_spool.target_tag(target)}-1-host-1-aaaaaaaa.spool"
    (spool / name).write_text("{not json\n")
    server.start()
    worker = WorkerProcess("-c", "2", env=_env(server, spool))
    client = redis.Redis(port=server.port)
    try:
        wait_for(lambda: list(spool.glob("corrupt-*")), timeout=20, message="the corrupt file to be moved aside")
        client.lpush("queue:default", json.dumps({"class": "tests.jobsapp.jobs.RecordJob", "args": ["after"],
                                                  "jid": "a" * 24, "queue": "default", "retry": True}))
        wait_for(lambda: _ran(server) == ["after"], timeout=20, message="a job to run after the corrupt file")
        assert worker.alive()
    finally:
        client.close()
        worker.stop()
    assert "is corrupt" in worker.output() and "moved aside to" in worker.output()
    assert [path.name for path in spool.iterdir()] == [f"corrupt-{name}"]  # kept for a person, out of every scan


def _config(server: RedisServer):
    from wurk_django.conf import Config

    return Config(raw={"REDIS_URL": server.url})


def test_without_a_spool_the_loss_is_still_told_by_exit_status(server):
    """``RELIABLE_PUSH_SPOOL = False``: the jobs are lost at exit, as before, and
    the process says so (every jid at ERROR, status 75)."""
    server.start()
    server.stop()
    env = _env(server, Path("unused"), RELIABLE_PUSH_SPOOL=False)
    proc = _run(PUSH_20, env)
    assert proc.returncode == reliable_push.EXIT_PUSHES_LOST, proc.stderr[-3000:]
    assert "20 pushed job(s) lost at exit" in proc.stderr
