"""One ambient rule (issue 41 item 3), run on a real worker started with ``--shard b``:
explicit argument > ``via()`` > the running job's shard > the settings, for batches,
``perform_async``, ``Client()``, ``AsyncResult`` and the data API alike."""

from __future__ import annotations

import json

import pytest

from tests.jobsapp.ambient_jobs import OUT, Looks, OpensABatch
from tests.redis_servers import TCPRedis
from tests.support import WorkerProcess, queued, wait_for, wurk_settings
from wurk_django import payload, via
from wurk_django.redis import connection
from wurk_django.results import store


@pytest.fixture(scope="module")
def servers():
    a, b = TCPRedis().start(), TCPRedis().start()
    yield a, b
    a.stop()
    b.stop()


@pytest.fixture
def shards(servers, redis_db):
    a, b = servers
    clients = a.client(4), b.client(5)
    for client in clients:
        client.flushdb()
    with wurk_settings(SHARDS={"a": a.url(4), "b": b.url(5)}):
        yield redis_db, *clients
    for client in clients:
        client.flushdb()
        client.close()
    connection.reset()


@pytest.fixture
def worker_on_b(shards, servers):
    """A worker started with ``--shard b``, running queue ``default`` of shard b."""
    a, b = servers
    worker = WorkerProcess("-c", "1", "--shard", "b", env={
        "WURK_TEST_EXTRA": json.dumps({"SHARDS": {"a": a.url(4), "b": b.url(5)}})})
    yield worker
    assert worker.stop() == 0, worker.output()


def _wait(condition, worker, what):
    try:
        wait_for(condition, timeout=30, message=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; worker log:\n{worker.output()[-4000:]}") from None


def test_a_job_on_a_shard_worker_opens_a_batch_and_its_children_run_there(shards, worker_on_b):
    """Main raised ``ValueError: ... routes to another Redis than batch`` in the job: the
    batch followed the job's shard, its children's pushes the settings' default."""
    default, _a, b = shards
    with via("b"):
        OpensABatch.perform_async(3)
    _wait(lambda: b.llen("test:ran") == 3, worker_on_b, "the children on shard b")
    assert sorted(b.lrange("test:ran", 0, -1)) == [b"child-0", b"child-1", b"child-2"]
    bid = b.lindex("test:bids", 0).decode()
    assert b.hget(f"b-{bid}", "total") == b"3"
    assert not default.exists(f"b-{bid}") and default.llen("queue:default") == 0
    assert b.zcard("retry") == 0 and b.zcard("dead") == 0


def test_inside_a_job_pushes_and_reads_follow_its_shard_then_via_then_the_explicit_argument(shards, worker_on_b):
    default, a, b = shards
    result_id = payload.new_jid()  # a result record on each server, each in its own state
    for redis, state in ((default, "ON-DEFAULT"), (a, "ON-A"), (b, "ON-B")):
        store.write(redis, result_id, {"custom_state": state, "meta": "{}"}, 600)
    with via("b"):
        Looks.perform_async(result_id)
    _wait(lambda: b.llen("test:looks") == 1, worker_on_b, "the job's record on shard b")
    seen = json.loads(b.lindex("test:looks", 0))
    # The running job's shard (b): perform_async and Client() pushed there, AsyncResult and
    # the data API read there.
    assert seen["plain"] == {"queue_size": 2, "result_state": "ON-B"}
    assert sorted(j["args"][0] for j in queued(b, OUT)) == ["plain", "plain-client"]
    # via() beats the job's shard.
    assert seen["via"] == {"queue_size": 2, "result_state": "ON-A"}
    assert sorted(j["args"][0] for j in queued(a, OUT)) == ["via", "via-client"]
    # An explicit argument (a config, a client, a shard named on the push) beats via().
    assert seen["explicit"] == {"result_state": "ON-DEFAULT", "queue_size": 2}
    assert sorted(j["args"][0] for j in queued(default, OUT)) == ["explicit-config", "explicit-shard"]
