"""A Redis at its ``maxmemory`` limit with ``noeviction`` (issue 25 item 5).

Redis then refuses every command that may grow memory: pushes, and also the fetch's
``LMOVE``/``BLMOVE``. A push must raise at the call site naming the limit; the worker
must keep draining the queues (which frees memory) through a fetch Redis accepts at
the limit, lose nothing, and never log "recovered" while fetches are refused.

Each test runs a private redis-server, stopped by its pid. The jobs write to a file,
since Redis refuses their writes too.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import redis as redis_lib

from tests.jobsapp.jobs import AppendJob
from tests.redis_servers import TCPRedis
from tests.support import WorkerProcess, wait_for
from wurk_django import payload
from wurk_django.admin.dashboard import memory_full
from wurk_django.client.push import Client
from wurk_django.errors import RedisFull
from wurk_django.server import heartbeat

pytestmark = pytest.mark.slow

JOBS = 300


@pytest.fixture
def server():
    started = TCPRedis("--maxmemory-policy", "noeviction").start()
    yield started
    started.stop()


def fill_to_the_limit(client: redis_lib.Redis, path: Path) -> None:
    """``JOBS`` jobs queued, then a limit so far below the memory in use that running
    every one of them cannot bring Redis under it."""
    client.sadd("queues", "default")
    for i in range(JOBS):
        client.lpush("queue:default", payload.dumps({
            "class": "tests.jobsapp.jobs.AppendJob", "args": [str(path), i], "queue": "default",
            "jid": payload.new_jid(), "created_at": payload.now_ms(), "enqueued_at": payload.now_ms()}))
    client.set("ballast", b"x" * 4_000_000)
    # The connection's query buffer held the ballast too, until the connection closes.
    client.connection_pool.disconnect()
    used = int(client.info("memory")["used_memory"])
    client.config_set("maxmemory", used - 2_000_000)
    with pytest.raises(redis_lib.OutOfMemoryError):
        client.lmove("queue:default", "queue:default|probe", "RIGHT", "LEFT")


def test_a_push_at_the_limit_raises_naming_the_limit(server, tmp_path):
    client = server.client()
    try:
        fill_to_the_limit(client, tmp_path / "ran")
        with pytest.raises(RedisFull) as raised:
            Client(redis=client).push({"class": AppendJob, "args": ["x", 1]})
        message = str(raised.value)
        assert "memory limit" in message and "maxmemory" in message and "noeviction" in message
        assert isinstance(raised.value, redis_lib.OutOfMemoryError)  # what callers caught before still works
        assert client.llen("queue:default") == JOBS
        assert "maxmemory-policy noeviction" in memory_full(client.info())
    finally:
        client.close()


def test_the_worker_drains_the_queue_at_the_limit_and_loses_nothing(server, tmp_path):
    client = server.client()
    ran = tmp_path / "ran"
    worker = None
    try:
        fill_to_the_limit(client, ran)
        extra = {"REDIS_URL": server.url(), "FETCH_POLL_INTERVAL": 1}
        worker = WorkerProcess("-c", "3", env={"WURK_TEST_EXTRA": json.dumps(extra)})

        def lines() -> list[str]:
            return ran.read_text().split() if ran.exists() else []

        wait_for(lambda: len(lines()) >= JOBS, timeout=120, interval=0.2, message="every queued job to run")
        # Acknowledged too: the private lists empty, which is what frees memory.
        wait_for(lambda: not [k for k in client.scan_iter("queue:default|*") if client.llen(k)], timeout=30,
                 message="the private lists to empty")
        assert sorted(map(int, lines())) == list(range(JOBS)), "a job was lost or ran twice"
        assert client.llen("queue:default") == 0
        assert memory_full(client.info()), "the test meant Redis to stay full the whole time"
        log = worker.output()
        assert "Redis is at its memory limit" in log and "maxmemory-policy noeviction" in log
        assert "recovered" not in log and "fetch failed" not in log
        assert "Traceback" not in log

        # Room again: the next job goes through the plain fetch, and only now does the log say so.
        client.config_set("maxmemory", 0)
        Client(redis=client).push({"class": AppendJob, "args": [str(ran), "after"]})
        wait_for(lambda: "after" in lines(), timeout=60, message="the job pushed once there was room")
        wait_for(lambda: "accepts the plain fetch again" in worker.output(), timeout=30,
                 message="the log to say the plain fetch works again")
        assert worker.stop() == 0
    finally:
        if worker is not None and worker.alive():
            worker.kill()
        client.close()


def test_jobs_that_fail_at_the_limit_wait_and_do_not_stop_the_drain(server, tmp_path):
    """A failure cannot be booked at the limit (the retry set would grow), nor can the
    job go back to its queue: it waits in the worker's private list while the thread
    goes on draining, and is booked once Redis has room. Nothing is lost."""
    client = server.client()
    ran = tmp_path / "ran"
    worker = None
    try:
        for i in range(5):
            client.lpush("queue:default", payload.dumps({
                "class": "tests.jobsapp.jobs.FailingJob", "args": [f"boom {i}"], "queue": "default", "retry": 3,
                "jid": payload.new_jid(), "created_at": payload.now_ms(), "enqueued_at": payload.now_ms()}))
        fill_to_the_limit(client, ran)  # the failing jobs are fetched first (oldest)
        extra = {"REDIS_URL": server.url(), "FETCH_POLL_INTERVAL": 1}
        worker = WorkerProcess("-c", "2", env={"WURK_TEST_EXTRA": json.dumps(extra)})
        wait_for(lambda: ran.exists() and len(ran.read_text().split()) >= JOBS, timeout=120, interval=0.2,
                 message="every good job to run past the failing ones")

        def waiting() -> int:
            return client.llen("queue:default") + sum(client.llen(k) for k in client.scan_iter("queue:default|*"))

        wait_for(lambda: waiting() == 5, timeout=30, message="only the 5 failing jobs left, in Redis")
        assert client.zcard("retry") == 0
        assert "waits in this worker's private list" in worker.output()

        client.config_set("maxmemory", 0)
        wait_for(lambda: client.zcard("retry") == 5, timeout=60, message="the failures booked once there was room")
        assert waiting() == 0
        assert worker.stop() == 0
    finally:
        if worker is not None and worker.alive():
            worker.kill()
        client.close()


def test_a_live_worker_stays_alive_to_the_reapers_while_redis_is_full(server, tmp_path):
    """The heartbeat's writes are refused at the limit; its entry must not lapse, or
    another worker's reaper would hand this worker's jobs in hand to someone else."""
    client = server.client()
    worker = None
    try:
        extra = {"REDIS_URL": server.url(), "FETCH_POLL_INTERVAL": 1}
        worker = WorkerProcess("-c", "1", env={"WURK_TEST_EXTRA": json.dumps(extra)})
        identity = wait_for(lambda: next((m for m in client.smembers("processes")
                                          if client.hexists(m, "info")), None), timeout=60,
                            message="the worker's first heartbeat")
        fill_to_the_limit(client, tmp_path / "ran")  # checks that Redis refuses a move now
        # Two beats or more at the limit: without renewal the TTL would be 35 s or less by
        # then; renewed at each beat it stays above TTL - BEAT_INTERVAL, less a loaded
        # machine's lag.
        time.sleep(2 * heartbeat.BEAT_INTERVAL + 5)
        assert client.ttl(identity) > heartbeat.TTL - heartbeat.BEAT_INTERVAL - 8
        assert client.hexists(identity, "info")
        assert "heartbeat failed" in worker.output()
        assert worker.stop() == 0
    finally:
        if worker is not None and worker.alive():
            worker.kill()
        client.close()
