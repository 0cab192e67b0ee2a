"""Pushes on a real Redis Cluster (3 primaries + 3 replicas), issue 46 stage 2: single,
bulk and scheduled pushes write the cluster layout (wurk_django/redis/cluster_layout.py)
through the one push door; what is not converted yet is refused before anything is sent."""

from __future__ import annotations

import time

import pytest

from tests.support import wurk_settings
from tests.topologies.cluster_client import cluster_settings
from wurk_django import Job, payload
from wurk_django.client import cluster_writer
from wurk_django.errors import RedisClusterError
from wurk_django.redis.cluster_layout import CLUSTER, QUEUE_SET_REFRESH


class PushedJob(Job):
    def perform(self, *args):
        pass


@pytest.fixture
def on_cluster(redis_cluster):
    with cluster_settings(redis_cluster, 4) as client:  # a replica's URL: the client finds the primaries
        yield client


def test_a_push_lands_on_its_queue_list_under_the_queue_tag(on_cluster):
    jid = PushedJob.set(queue="alpha").perform_async(1, "two")
    [raw] = on_cluster.lrange(CLUSTER.queue("alpha"), 0, -1)
    job = payload.loads(raw)
    assert job["jid"] == jid and job["args"] == [1, "two"] and job["queue"] == "alpha"
    assert "enqueued_at" in job and job["class"].endswith("PushedJob")
    assert on_cluster.smembers(CLUSTER.queues) == {b"alpha"}
    assert on_cluster.llen(CLUSTER.wake("alpha")) == 1 and on_cluster.ttl(CLUSTER.wake("alpha")) > 0
    # Nothing in the one-server layout.
    assert on_cluster.exists("queue:alpha", "queues", "schedule") == 0


def test_queues_spread_over_every_primary(on_cluster, redis_cluster):
    names = [f"spread{n}" for n in range(24)]
    for name in names:
        PushedJob.set(queue=name).perform_async(name)
    owners = {on_cluster.get_node_from_key(CLUSTER.queue(name)).port for name in names}
    assert owners == set(redis_cluster.primary_ports())
    assert all(on_cluster.llen(CLUSTER.queue(name)) == 1 for name in names)
    assert on_cluster.smembers(CLUSTER.queues) == {n.encode() for n in names}


def test_bulk_push_in_several_round_trips(on_cluster):
    jids = PushedJob.set(queue="bulk").perform_bulk([[n] for n in range(25)], batch_size=10)
    raws = on_cluster.lrange(CLUSTER.queue("bulk"), 0, -1)
    assert sorted(payload.loads(r)["jid"] for r in raws) == sorted(jids) and len(set(jids)) == 25
    assert sorted(payload.loads(r)["args"][0] for r in raws) == list(range(25))
    assert on_cluster.llen(CLUSTER.wake("bulk")) == 25


def test_a_scheduled_push_goes_into_its_queues_own_schedule_set(on_cluster):
    before = time.time()
    jid = PushedJob.set(queue="later").perform_in(300, 7)
    bulk = PushedJob.set(queue="later2").perform_bulk([[1], [2]], at=before + 600)
    [(raw, score)] = on_cluster.zrange(CLUSTER.schedule("later"), 0, -1, withscores=True)
    job = payload.loads(raw)
    assert job["jid"] == jid and job["args"] == [7] and "at" not in job and "enqueued_at" not in job
    assert before + 299 <= score <= time.time() + 301
    assert sorted(payload.loads(r)["jid"] for r in on_cluster.zrange(CLUSTER.schedule("later2"), 0, -1)) == sorted(bulk)
    assert on_cluster.exists(CLUSTER.queue("later")) == 0 and on_cluster.exists("schedule") == 0
    # Registered, so the scheduler knows which queues' sets to look at.
    assert on_cluster.smembers(CLUSTER.queues) == {b"later", b"later2"}


def test_the_queue_set_is_told_once_per_refresh_not_once_per_push():
    from wurk_django.client import operations

    cluster_writer.forget()
    ops = operations.for_jobs([{"queue": "q", "class": "C", "args": [], "jid": "j"}])
    first, due = cluster_writer.commands(ops, "target", now=1000.0)
    assert ("SADD", CLUSTER.queues, "q") in first and due == ["q"]
    cluster_writer._registered[(__import__("os").getpid(), "target", "q")] = 1000.0
    again, due = cluster_writer.commands(ops, "target", now=1000.0 + QUEUE_SET_REFRESH / 2)
    assert not any(c[0] == "SADD" for c in again) and due == []
    later, due = cluster_writer.commands(ops, "target", now=1000.0 + QUEUE_SET_REFRESH)
    assert ("SADD", CLUSTER.queues, "q") in later
    # Every key of the push but the queue set is in the queue's slot.
    from redis.crc import key_slot

    slots = {key_slot(str(c[1]).encode()) for c in later if c[0] != "SADD"}
    assert slots == {key_slot(CLUSTER.queue("q").encode())}


def test_many_pushes_write_the_queue_set_once(on_cluster, redis_cluster):
    # The {wurk} slot's primary counts its SADD calls: one for 30 pushes to one queue.
    node = on_cluster.get_node_from_key(CLUSTER.queues)
    primary = redis_cluster.node_client(node.port)
    try:
        primary.config_resetstat()
        for n in range(30):
            PushedJob.set(queue="hot").perform_async(n)
        calls = primary.info("commandstats").get("cmdstat_sadd", {}).get("calls", 0)
    finally:
        primary.close()
    assert calls == 1
    assert on_cluster.llen(CLUSTER.queue("hot")) == 30


def test_a_push_needing_a_feature_not_converted_yet_is_refused_before_writing(on_cluster):
    from wurk_django.client import operations
    from wurk_django.client.writer import Writer

    writer = Writer()
    job = {"queue": "feat", "class": "C", "args": [], "jid": "j1"}
    # A companion command over two slots; a feature's script with no cluster split.
    spanning = ("EVALSHA", "abc", 2, "{x}status:j1", "{y}other")
    for ops in ([operations.Extra(spanning), *operations.for_jobs([dict(job)])],
                [operations.Enqueue("feat", b"{}", None, via=("EVALSHA", "abc", 0))]):
        with pytest.raises(RedisClusterError) as caught:
            writer.write_operations(ops, hooks=False)
        message = str(caught.value)
        assert "not supported on a Redis Cluster yet" in message and "docs/redis.md#redis-cluster" in message
    assert on_cluster.exists(CLUSTER.queue("feat"), "{x}status:j1", CLUSTER.queues) == 0


def test_a_pushing_script_in_its_queues_slot_is_sent_as_the_jobs_push(on_cluster):
    """Issue 46 item 3: a job whose ``via`` is a script with every key in its queue's slot
    (a workflow step's claim-and-push) is sent as it is, the queue registered; the same
    script with a key of another slot is refused before anything is sent."""
    from wurk_django.batch.scripts import CLAIM_AND_PUSH
    from wurk_django.client import operations
    from wurk_django.client.writer import Writer

    raw = payload.dumps({"queue": "feat", "class": "C", "args": [], "jid": "j1"})
    claim = CLUSTER.workflow_pushed("feat", "W", "s")

    def via(keys):
        return operations.Enqueue("feat", raw, None, via=CLAIM_AND_PUSH.command(keys, [60, *operations.wake_args(),
                                                                                      raw]))

    with pytest.raises(RedisClusterError, match="not supported on a Redis Cluster yet"):
        Writer().write_operations([via(["{elsewhere}:claim", CLUSTER.queue("feat"), CLUSTER.wake("feat")])],
                                  hooks=False)
    assert on_cluster.exists(CLUSTER.queue("feat"), "{elsewhere}:claim", CLUSTER.queues) == 0
    for _ in range(2):  # claimed once: the second push writes nothing
        Writer().write_operations([via([claim, CLUSTER.queue("feat"), CLUSTER.wake("feat")])], hooks=False)
    assert on_cluster.lrange(CLUSTER.queue("feat"), 0, -1) == [raw]
    assert on_cluster.llen(CLUSTER.wake("feat")) == 1 and on_cluster.sismember(CLUSTER.queues, "feat")


def test_what_is_not_converted_is_still_refused_clearly(on_cluster):
    from wurk_django.redis import connection  # revokes run on a cluster (issue 46 item 3); the asyncio client not yet

    with pytest.raises(RedisClusterError, match="not supported on a Redis Cluster yet"):
        connection.async_redis()


def test_an_async_push_through_the_door_lands_in_the_cluster_layout(on_cluster):
    import asyncio

    from wurk_django.client.push import Client

    client = Client()
    planned = client.plan({"class": PushedJob, "args": [5], "queue": "async"})

    async def main():
        return await client.awrite(planned)

    jid = asyncio.run(main())
    [raw] = on_cluster.lrange(CLUSTER.queue("async"), 0, -1)
    assert payload.loads(raw)["jid"] == jid and on_cluster.smembers(CLUSTER.queues) == {b"async"}


def test_stored_bytes_without_a_queue_are_refused_naming_them(on_cluster):
    from wurk_django import keys
    from wurk_django.client.writer import Writer

    with pytest.raises(ValueError, match="without a queue name cannot be placed on a Redis Cluster"):
        Writer().add_to_set(keys.DEAD, [(b'{"class":"C","args":[]}', time.time())])
    with pytest.raises(ValueError, match="not json"):
        Writer().add_to_set(keys.RETRY, [(b"not json", time.time())])
    assert on_cluster.exists(CLUSTER.queues) == 0


class UniqueOnCluster(Job):
    unique_for = 60

    def perform(self, *args):
        pass


def test_a_unique_job_takes_its_lock_in_its_queues_slot_and_a_duplicate_is_dropped(on_cluster):
    # Issue 46 item 3 (the worker's side: tests/topologies/test_cluster_features.py).
    with wurk_settings(UNIQUE_JOBS=True):
        jid = UniqueOnCluster.set(queue="uniq").perform_async(1)
        assert UniqueOnCluster.set(queue="uniq").perform_async(1) is None
        PushedJob.set(queue="uniq").perform_async(2)  # a job without the feature goes as ever
    assert [payload.loads(r)["args"] for r in on_cluster.lrange(CLUSTER.queue("uniq"), 0, -1)] == [[2], [1]]
    [lock] = on_cluster.keys("*unique*", target_nodes=on_cluster.PRIMARIES)
    assert lock.startswith(b"{q:uniq}:unique:") and on_cluster.get(lock) == jid.encode()


def test_a_django_tasks_enqueue_writes_its_result_record_before_its_job(on_cluster, settings):
    pytest.importorskip("wurk_django.tasks.compat")
    from tests.tasks.conftest import WURK_TASKS

    try:
        from tests.tasks import sample
    except Exception:  # no Tasks framework in this environment: the tasks tests skip too
        pytest.skip("no django.tasks framework")
    settings.TASKS = WURK_TASKS
    result = sample.add.enqueue(1, 2)
    [raw] = on_cluster.lrange(CLUSTER.queue("default"), 0, -1)
    assert payload.loads(raw)["jid"] == result.id
    assert on_cluster.hget(f"status:{result.id}", "state") == b"enqueued"
    assert sample.add.get_result(result.id).status.name == "READY"
