"""Eviction is loud (issue 43 item 3, CORE-002): a real worker against a private
redis-server started with ``--maxmemory-policy allkeys-lfu`` refuses to start unless
``WURK["ALLOW_EVICTION"]`` says so; allowed, it runs, and keys Redis then evicts are
logged by the heartbeat. The once-per-growth rule is checked on :class:`EvictionWatch`
itself, with a clock of its own."""

from __future__ import annotations

import json
import logging

import pytest

from tests.redis_servers import TCPRedis
from tests.support import WorkerProcess, wait_for
from wurk_django import payload
from wurk_django.redis import eviction
from wurk_django.redis.eviction import EvictionWatch


@pytest.fixture
def lfu():
    server = TCPRedis("--maxmemory-policy", "allkeys-lfu").start()
    yield server
    server.stop()


def _job(value: str) -> bytes:
    return payload.dumps({"class": "tests.jobsapp.jobs.RecordJob", "args": [value], "jid": payload.new_jid(),
                          "queue": "default", "created_at": payload.now_ms()})


def _worker(server, **extra) -> WorkerProcess:
    return WorkerProcess("-c", "1", env={"WURK_TEST_EXTRA": json.dumps({"REDIS_URL": server.url(), **extra})})


def _beat(client) -> bytes | None:
    """The ``beat`` field of the one worker's process entry (None before its first beat)."""
    wait_for(lambda: client.scard("processes") == 1, timeout=30, message="the worker's process entry")
    [identity] = client.smembers("processes")
    return client.hget(identity, "beat")


def test_a_worker_refuses_a_redis_that_evicts(lfu):
    client = lfu.client()
    worker = _worker(lfu)
    try:
        client.lpush("queue:default", _job("never"))
        assert worker.wait(timeout=60) == 1
        output = worker.output()
        assert "maxmemory-policy allkeys-lfu" in output and "WURK['ALLOW_EVICTION'] = True" in output
        assert "noeviction" in output and lfu.url() in output
        assert "Traceback" not in output
        assert client.llen("queue:default") == 1 and not client.exists("test:ran")  # nothing was fetched
    finally:
        if worker.alive():
            worker.kill()
        client.close()


def test_allowed_it_runs_and_logs_the_keys_redis_evicts(lfu):
    client = lfu.client()
    worker = _worker(lfu, ALLOW_EVICTION=True)
    try:
        client.lpush("queue:default", _job("ran"))
        wait_for(lambda: client.lrange("test:ran", 0, -1) == [b"ran"], timeout=60, message="the job to run")
        assert "has maxmemory-policy allkeys-lfu: keys may be evicted" in worker.output()
        # The heartbeat's first reading of evicted_keys is its baseline, taken right after the
        # beat writes the process entry. On a loaded machine that first beat can come after the
        # job ran, so evicting now could land in the baseline ("has evicted N keys since it
        # started") instead of the growth line this test is about: wait for a second beat.
        first = _beat(client)
        wait_for(lambda: _beat(client) not in (None, first), timeout=30, message="a second heartbeat")
        # Make Redis evict: a limit just above what it holds, then big keys.
        used = int(client.info("memory")["used_memory"])
        client.config_set("maxmemory", used + 2_000_000)
        for n in range(12):
            client.set(f"big:{n}", b"x" * 500_000)
        evicted = int(client.info("stats")["evicted_keys"])
        assert evicted > 0
        client.config_set("maxmemory", 0)
        # The next beat (every 10 s) sees the growth.
        wait_for(lambda: "evicted_keys" in worker.output(), timeout=30, message="the evictions logged")
        [line] = [line for line in worker.output().splitlines() if "evicted_keys" in line]
        assert "WARNING" in line and "maxmemory-policy allkeys-lfu" in line and f"evicted_keys {evicted}" in line
        assert worker.alive()
        assert worker.stop() == 0
        assert "Traceback" not in worker.output()
    finally:
        if worker.alive():
            worker.kill()
        client.close()


def test_evictions_are_logged_once_per_growth_at_most_once_a_minute(caplog):
    now = [1000.0]
    watch = EvictionWatch("redis://x", allowed=False, clock=lambda: now[0])
    with caplog.at_level(logging.WARNING, logger="wurk_django.worker"):
        watch.observe("allkeys-lfu", 0)  # the baseline: nothing evicted before
        assert caplog.records == []
        for _ in range(5):  # beats without growth say nothing
            now[0] += 10
            watch.observe("allkeys-lfu", 0)
        assert caplog.records == []
        now[0] += 10
        watch.observe("allkeys-lfu", 7)
        [first] = caplog.records
        assert first.levelno == logging.ERROR and "evicted 7 keys (evicted_keys 7" in first.getMessage()
        for count in (9, 12, 20):  # still growing, within the minute: kept for the next line
            now[0] += 10
            watch.observe("allkeys-lfu", count)
        assert len(caplog.records) == 1
        now[0] += 30
        watch.observe("allkeys-lfu", 25)
        assert len(caplog.records) == 2 and "evicted 18 keys (evicted_keys 25" in caplog.records[1].getMessage()
        for _ in range(20):  # no growth: no line, however long
            now[0] += 10
            watch.observe("allkeys-lfu", 25)
        assert len(caplog.records) == 2 and watch.evicted == 25


def test_the_baseline_the_allowed_level_and_a_policy_changed_at_run_time(caplog):
    now = [0.0]
    with caplog.at_level(logging.WARNING, logger="wurk_django.worker"):
        allowed = EvictionWatch("redis://x", allowed=True, clock=lambda: now[0])
        allowed.observe("allkeys-lru", 40)  # evicted before this process started: said once
        allowed.observe("allkeys-lru", 40)
        [before] = caplog.records
        assert before.levelno == logging.WARNING and "has evicted 40 keys since it started" in before.getMessage()
        now[0] += 100
        allowed.observe("allkeys-lru", 41)
        assert caplog.records[-1].levelno == logging.WARNING  # expected evictions: not an error
        caplog.clear()
        watch = EvictionWatch("redis://x", allowed=False, clock=lambda: now[0])
        watch.observe("noeviction", 0)
        watch.observe("volatile-lru", 0)  # CONFIG SET while the worker runs
        watch.observe("volatile-lru", 0)
        [changed] = caplog.records
        assert changed.levelno == logging.ERROR and "now has maxmemory-policy volatile-lru" in changed.getMessage()
        caplog.clear()
        watch.observe("volatile-lru", None)  # a reading without the figure changes nothing
        assert caplog.records == [] and watch.evicted == 0
        now[0] += 100
        watch.observe("volatile-lru", 3)
        assert [r.levelno for r in caplog.records] == [logging.ERROR]
        now[0] += 100
        watch.observe("volatile-lru", 1)  # a restarted server counts from 0 again: a new baseline
        watch.observe("volatile-lru", 1)
        assert len(caplog.records) == 1 and watch.evicted == 1


def test_the_policy_is_read_where_config_is_disabled(lfu):
    client = lfu.client()
    try:
        assert eviction.policy(client) == "allkeys-lfu"
        assert eviction.state(client) == ("allkeys-lfu", 0)
    finally:
        client.close()
    hidden = TCPRedis("--maxmemory-policy", "volatile-ttl", "--rename-command", "CONFIG", "").start()
    client = hidden.client()
    try:
        assert eviction.policy_from_config(client) is None
        assert eviction.policy(client) == "volatile-ttl"  # from INFO memory
    finally:
        client.close()
        hidden.stop()
