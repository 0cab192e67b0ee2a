"""The per-job context (issue 24 item 1): a worker's features use the worker's own
config and the Redis its jobs came from, never the settings' defaults.

A worker started with ``--shard b`` runs a batch with callbacks, a unique job and
a job over its rate limit; every key they write must land on shard ``b`` and
none on the default Redis (checked by scanning both servers). The command line's
``-q``/``-c`` are what the job context reports.
"""

from __future__ import annotations

import json

import pytest

from tests.redis_servers import TCPRedis
from tests.support import WorkerProcess, wait_for, wurk_settings
from wurk_django import context, via
from wurk_django.batch import Batch
from wurk_django.conf import get_config
from wurk_django.redis import connection


@pytest.fixture(scope="module")
def server():
    shard = TCPRedis().start()
    yield shard
    shard.stop()


@pytest.fixture
def shard_b(server, redis_db):
    client = server.client(5)
    client.flushdb()
    with wurk_settings(SHARDS={"b": server.url(5)}, UNIQUE_JOBS=True):
        yield redis_db, client
    client.flushdb()
    client.close()
    connection.reset()


def _worker(server, *args: str) -> WorkerProcess:
    extra = {"SHARDS": {"b": server.url(5)}, "UNIQUE_JOBS": True}
    return WorkerProcess("--shard", "b", *args, env={"WURK_TEST_EXTRA": json.dumps(extra)})


def _keys(client) -> set[str]:
    return {k.decode() for k in client.scan_iter(count=1000)}


def test_a_shard_worker_keeps_batch_unique_and_limiter_state_on_its_shard(shard_b, server):
    from tests.jobsapp.jobs import ShardCallbacks, ShardDoomedJob, ShardLimitedJob, ShardRecordJob, ShardUniqueJob

    default, b = shard_b
    with via("b"):
        batch = Batch()
        batch.on("success", ShardCallbacks).on("complete", ShardCallbacks)
        with batch.jobs():
            ShardRecordJob.perform_async("in-batch-1")
            ShardRecordJob.perform_async("in-batch-2")
        doomed = Batch()  # its job dies: the death handlers and death callbacks run on b too
        doomed.on("death", ShardCallbacks)
        with doomed.jobs():
            doomed_jid = ShardDoomedJob.perform_async("x")
        unique_jid = ShardUniqueJob.perform_async("once")
        assert ShardUniqueJob.perform_async("once") is None  # the lock is on b: a duplicate is dropped
        limited_jid = ShardLimitedJob.perform_async("shard-test-window")
    assert _keys(default) == set()  # pushing through via("b") wrote nothing on the default Redis
    lock_keys = {k for k in _keys(b) if k.startswith("unique:")}
    assert len(lock_keys) == 2  # the unique job's and the doomed one's

    worker = _worker(server, "-c", "2")
    try:
        wait_for(lambda: b.llen("test:callbacks") == 3, timeout=60, message="the batch callbacks on b")
        wait_for(lambda: b.zcard("schedule") == 1, timeout=30, message="the limited job rescheduled on b")
        wait_for(lambda: b"unique:once" in b.lrange("test:ran", 0, -1), timeout=30, message="the unique job")
    finally:
        assert worker.stop() == 0, worker.output()

    assert sorted(v.decode() for v in b.lrange("test:callbacks", 0, -1)) == sorted([
        f"complete:{batch.bid}", f"success:{batch.bid}:2", f"death:{doomed.bid}"])
    # The batch acks, the callbacks' own acks and the gate all ran on b: it finished there.
    assert b.hget(f"b-{batch.bid}", "pending") == b"0"
    # The doomed job is in b's dead set; both locks were released on b (after the success, and
    # by the death handler).
    (dead,) = b.zrange("dead", 0, -1)
    assert json.loads(dead)["jid"] == doomed_jid and b.sismember(f"b-{doomed.bid}-died", doomed_jid)
    assert not any(k.startswith("unique:") for k in _keys(b)), unique_jid
    # The limiter counted on b and put the job back in b's schedule, one round later.
    (rescheduled, _at), = b.zrange("schedule", 0, -1, withscores=True)
    again = json.loads(rescheduled)
    assert again["jid"] == limited_jid and again["overrated"] == 1
    assert any("shard-test-window" in k for k in _keys(b))
    # Nothing the worker or its jobs' features did reached the default Redis.
    assert _keys(default) == set()


def test_the_context_carries_the_command_line_overrides(shard_b, server):
    from tests.jobsapp.jobs import ContextRecordJob

    default, b = shard_b
    with via("b"):
        jid = ContextRecordJob.set(queue="critical").perform_async("test:context")
    worker = _worker(server, "-c", "3", "-q", "critical", "-q", "low")
    try:
        wait_for(lambda: b.llen("test:context") == 1, timeout=60, message="the context recorded on b")
    finally:
        assert worker.stop() == 0, worker.output()
    seen = json.loads(b.lpop("test:context"))
    assert seen == {"concurrency": 3, "queues": ["critical", "low"], "shard": "b", "queue": "critical",
                    "jid": jid}
    assert get_config().concurrency != 3  # the settings' value differs: the context did not read them
    assert _keys(default) == set()


def test_outside_a_job_the_context_follows_the_settings_and_via(shard_b):
    default, b = shard_b
    assert context.running() is None
    assert context.config() is get_config()
    here = context.current()
    assert here.config is get_config() and here.raw is None and here.job is None
    with via("b"):
        assert context.config().shard == "b"
        context.redis().set("test:via", "1")
    assert b.get("test:via") == b"1" and not default.exists("test:via")


def test_inside_a_job_via_still_picks_another_shard_with_the_workers_settings(shard_b):
    default, b = shard_b
    worker_config = get_config().for_shard("b")
    token = context.enter(context.JobContext(worker_config, b, raw=b"{}", queue="default", job={"jid": "x"}))
    try:
        assert context.config() is worker_config and context.redis() is b
        with via("default"):
            assert context.config().shard == "default"
            context.redis().set("test:back-home", "1")
    finally:
        context.leave(token)
    assert default.get("test:back-home") == b"1" and not b.exists("test:back-home")


def test_one_rule_explicit_then_via_then_the_running_job_then_the_settings(shard_b):
    """Issue 41 item 3: context.config()/context.redis() in the order the rule gives, and
    the entry points that take it (get_config(), the data API's reads, Client())."""
    from wurk_django import api
    from wurk_django.client.push import Client

    default, b = shard_b
    settings_config = get_config()
    worker_config = settings_config.for_shard("b")
    assert context.config() is settings_config  # 4. the settings
    token = context.enter(context.JobContext(worker_config, b, raw=b"{}", queue="default", job={"jid": "x"}))
    try:
        assert context.config() is worker_config and context.redis() is b  # 3. the running job's
        assert get_config() is worker_config and Client().config is worker_config
        b.rpush("queue:rule", "x")
        assert api.Queue("rule").size == 1
        with via("default"):
            assert context.config().shard == "default"  # 2. via() beats the job's shard
            assert api.Queue("rule").size == 0
            assert context.config(worker_config) is worker_config  # 1. an explicit argument beats via()
            assert context.redis(b) is b and api.Queue("rule", redis=b).size == 1
            assert Client(config=worker_config).config is worker_config
    finally:
        context.leave(token)


def test_every_limiter_kind_counts_on_the_workers_shard(shard_b, server):
    # Issue 25 item 3: concurrent, bucket, window, leaky and points limiters used by a
    # job on a --shard worker keep their state on that shard.
    from tests.jobsapp.jobs import ShardEveryLimiterJob

    default, b = shard_b
    with via("b"):
        ShardEveryLimiterJob.perform_async("kinds")
    worker = _worker(server, "-c", "2")
    try:
        wait_for(lambda: b"limiters:kinds" in b.lrange("test:ran", 0, -1), timeout=60, message="the limiters used on b")
    finally:
        assert worker.stop() == 0, worker.output()
    keys_on_b = _keys(b)
    for kind in ("concurrent", "bucket", "window", "leaky", "points"):
        assert any(f"kinds-{kind}" in k for k in keys_on_b), (kind, sorted(keys_on_b))
    assert _keys(default) == set()
