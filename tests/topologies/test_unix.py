"""Unix sockets (issue 18 item 3): ``unix:///path?db=N`` end to end with a worker
process: immediate, scheduled and failing jobs, its heartbeat, a clean stop."""

from __future__ import annotations

import json
import time

import pytest

from tests.redis_servers import UnixRedis
from tests.support import WorkerProcess, wait_for
from wurk_django import payload
from wurk_django.client.writer import Writer
from wurk_django.conf import Config
from wurk_django.redis import connection


@pytest.fixture
def unix():
    server = UnixRedis().start()
    yield server
    connection.reset()
    server.stop()


def test_a_worker_process_runs_over_a_unix_socket(unix):
    url = unix.url(3)
    plain = unix.client(3)
    config = Config(raw={"REDIS_URL": url, "TAG": "t"})

    def job(klass: str, *args, **extra) -> dict:
        return {"class": f"tests.jobsapp.jobs.{klass}", "args": list(args), "queue": "default",
                "jid": payload.new_jid(), "created_at": payload.now_ms(), **extra}

    writer = Writer(config)
    writer.push([job("RecordJob", f"now-{i}") for i in range(10)])
    writer.push([job("RecordJob", "later", at=time.time() + 1)])
    writer.push([job("FailingJob", "boom")])
    worker = WorkerProcess("-c", "2", env={"WURK_TEST_REDIS_URL": url, "WURK_TEST_EXTRA": json.dumps(
        {"FETCH_POLL_INTERVAL": 0.5, "POLL_INTERVAL_AVERAGE": 0.5})})
    try:
        wait_for(lambda: plain.llen("test:ran") == 11, timeout=30, message="11 jobs run over the socket")
        assert b"later" in plain.lrange("test:ran", 0, -1)
        wait_for(lambda: plain.zcard("retry") == 1, timeout=15, message="the failing job in the retry set")
        [identity] = wait_for(lambda: plain.smembers("processes"), timeout=10, message="the heartbeat")
        assert plain.hget(identity, "beat")
        assert plain.llen("queue:default") == 0 and plain.zcard("schedule") == 0
    finally:
        assert worker.stop() == 0, worker.output()
    assert not plain.smembers("processes")
    assert "Traceback" not in worker.output(), worker.output()
    plain.close()
