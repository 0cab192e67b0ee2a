"""The reaper on managed-Redis policies (issue 25 item 5): a server that refuses
``OBJECT IDLETIME`` (an LFU eviction policy) and one with ``CONFIG`` renamed away,
each a private redis-server started here and stopped by its pid."""

from __future__ import annotations

import json

import pytest
import redis as redis_lib

from tests.redis_servers import TCPRedis
from tests.support import WorkerProcess, wait_for
from wurk_django import keys, payload
from wurk_django.conf import Config
from wurk_django.server.reaper import Reaper

pytestmark = pytest.mark.slow

# A process on another host whose heartbeat has lapsed: dead, judged by the grace.
ORPHAN = "queue:default|elsewhere|42|0123456789ab|0"


def _job(value: str) -> bytes:
    return payload.dumps({"class": "tests.jobsapp.jobs.RecordJob", "args": [value], "jid": payload.new_jid(),
                          "queue": "default", "created_at": payload.now_ms()})


@pytest.fixture(params=[("--maxmemory-policy", "allkeys-lfu"), ("--rename-command", "CONFIG", "")],
                ids=["lfu", "no-config"])
def server(request):
    started = TCPRedis(*request.param).start()
    yield started
    started.stop()


def test_a_dead_process_list_is_reclaimed(server):
    client = server.client()
    try:
        jobs = [_job("a"), _job("b")]
        client.rpush(ORPHAN, *jobs)
        if "lfu" in client.info("memory").get("maxmemory_policy", ""):
            with pytest.raises(redis_lib.ResponseError):
                client.object("idletime", ORPHAN)
        else:
            with pytest.raises(redis_lib.ResponseError):
                client.config_get("maxmemory-policy")
        reaper = Reaper(["default"], grace=1, config=Config(raw={"REDIS_URL": server.url(), "TAG": "t"}))
        # The grace still holds: a booting owner could be about to beat.
        assert reaper.sweep(full=False) in (0, 2)
        wait_for(lambda: reaper.sweep(full=False) == 2 or not client.exists(ORPHAN), message="the list reclaimed")
        assert not client.exists(ORPHAN)
        assert sorted(client.lrange("queue:default", 0, -1)) == sorted(jobs)
    finally:
        client.close()


def test_a_list_in_use_is_left_alone_until_it_rests(server):
    """Where the server keeps no idle time, a list whose length changes (someone uses
    it) starts the grace again."""
    client = server.client()
    try:
        client.rpush(ORPHAN, _job("a"))
        config = Config(raw={"REDIS_URL": server.url(), "TAG": "t"})
        reaper = Reaper(["default"], grace=3600, config=config)
        reaper._no_idletime = True  # the fallback, also on the server that keeps idle times
        assert reaper.sweep(full=False) == 0
        client.rpush(ORPHAN, _job("b"))
        assert reaper.sweep(full=False) == 0
        seen = client.hget(keys.REAPER_QUIET, ORPHAN).decode()
        assert seen.endswith(":2")  # the clock started again at the new length
        client.hset(keys.REAPER_QUIET, ORPHAN, f"{float(seen.split(':')[0]) - 3601}:2")
        assert reaper.sweep(full=False) == 2
        assert not client.hexists(keys.REAPER_QUIET, ORPHAN)
    finally:
        client.close()


def test_a_worker_on_that_server_runs_the_dead_process_jobs(server):
    client = server.client()
    worker = None
    try:
        client.rpush(ORPHAN, _job("orphaned"))
        extra = {"REDIS_URL": server.url(), "REAPER_ORPHAN_GRACE": 1, "SUPER_FETCH_REAPER_INTERVAL": 1,
                 # The LFU server evicts: the worker refuses it unless told (issue 43 item 3).
                 "ALLOW_EVICTION": True}
        worker = WorkerProcess("-c", "1", env={"WURK_TEST_EXTRA": json.dumps(extra)})
        wait_for(lambda: client.lrange("test:ran", 0, -1) == [b"orphaned"], timeout=60,
                 message="the orphaned job to run")
        assert worker.stop() == 0
        assert "Traceback" not in worker.output()
    finally:
        if worker is not None and worker.alive():
            worker.kill()
        client.close()


def test_the_first_sweep_is_off_the_heartbeats_beat_RUN_130():
    """The default minute is a multiple of the 10 s beat: started together, every sweep
    would run with a beat, and an idle worker's pool would open a second connection for
    the two, kept until the next beat's trim. The first sweep comes 0.5-5 s late instead
    (a tenth of that for a 1 s interval: timer.off_the_beat), and both keep their period."""
    waits = [Reaper(["default"], interval=60).loop._first_wait for _ in range(50)]
    assert all(60.5 <= w <= 65 for w in waits) and len(set(waits)) > 1
    assert all(1.05 <= Reaper(["default"], interval=1).loop._first_wait <= 1.5 for _ in range(20))
