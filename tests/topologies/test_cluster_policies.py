"""Push policies on a real Redis Cluster (3 primaries + 3 replicas) with real ``manage.py wurk``
worker processes (issue 46 item 3, issue 47 item 3): every key of a debounce or a throttle is in
the slot of the job's queue, one script per step as on one server; a debounced burst fires once
after its quiet time, with the last push's arguments; a throttle admits one push per slot; a
replaced tracked push's record reads ``revoked``. Nothing lands in the one-server layout."""

from __future__ import annotations

import time

from redis.crc import key_slot

from tests.jobsapp.cluster_policy_jobs import ClusterDebounced, ClusterThrottled, ClusterTrackedDebounced
from tests.support import wait_for
from tests.topologies.cluster_client import ran, worker_env
from wurk_django import payload, status
from wurk_django.redis.cluster_layout import CLUSTER

QUEUES = ["c0", "c1", "c2", "c3"]
WAIT = 60.0  # generous: the machine is shared; nothing here asserts a duration


def _keys(client, pattern: str) -> list[bytes]:
    """Every key matching ``pattern`` on every primary."""
    return client.keys(pattern, target_nodes=client.PRIMARIES)


def _schedule(client, queue: str) -> list[tuple[dict, float]]:
    return [(payload.loads(raw), score) for raw, score in client.zrange(CLUSTER.schedule(queue), 0, -1,
                                                                        withscores=True)]


def _apart(client, names=QUEUES) -> tuple[str, str]:
    """Two queues whose slots are on different primaries."""
    owner = {name: client.get_node_from_key(CLUSTER.queue(name)).port for name in names}
    return names[0], next(name for name in names[1:] if owner[name] != owner[names[0]])


def _away_from_a_slot_boundary(period: float = 60, margin: float = 10) -> None:
    """Wait until the current throttle slot has ``margin`` seconds left."""
    while time.time() % period > period - margin:
        time.sleep(0.2)


def _nothing_in_the_one_server_layout(client) -> None:
    for pattern in ("debounce:*", "throttle:*", "debounces", "throttle-drops", "schedule", "queue:*", "status:*"):
        assert not _keys(client, pattern), pattern


def test_a_debounced_burst_is_one_entry_of_its_queues_schedule_set_in_one_slot(on_cluster):
    one, two = _apart(on_cluster)
    before = time.time()
    jids = [ClusterDebounced.set(queue=one).perform_async(version) for version in (1, 2, 3)]
    other = [ClusterDebounced.set(queue=two).perform_async(version) for version in (1, 2)]
    assert all(jids) and len(set(jids)) == 3 and all(other)
    [(job, score)] = _schedule(on_cluster, one)
    assert job["args"] == [3] and job["jid"] == jids[-1] and job["debounce_for"] == 1.0
    assert before + 1 <= score <= time.time() + 1
    [(job2, _score)] = _schedule(on_cluster, two)
    assert job2["args"] == [2]  # a queue is its own key: two bursts
    for queue in (one, two):
        [state] = _keys(on_cluster, f"{{q:{queue}}}:debounce:*")
        assert key_slot(state) == key_slot(CLUSTER.queue(queue).encode())
        assert on_cluster.hget(state, "member") == on_cluster.zrange(CLUSTER.schedule(queue), 0, 0)[0]
        assert on_cluster.zrange(CLUSTER.debounces(queue), 0, -1) == [state]
    assert on_cluster.sismember(CLUSTER.queues, one) and on_cluster.sismember(CLUSTER.queues, two)
    assert on_cluster.llen(CLUSTER.queue(one)) == 0
    _nothing_in_the_one_server_layout(on_cluster)


def test_a_replaced_tracked_push_reads_revoked(on_cluster):
    jids = [ClusterTrackedDebounced.set(queue="c1").perform_async(version) for version in (1, 2, 3)]
    [(job, _score)] = _schedule(on_cluster, "c1")
    assert job["jid"] == jids[2]
    for old, new in zip(jids, jids[1:], strict=False):
        record = status.get(old)
        assert record.state == "revoked" and record.finished
        assert record.message == f"replaced by a later push {new}"
        assert 0 < on_cluster.ttl(f"status:{old}") <= record.ttl
    assert status.get(jids[2]).state == "scheduled"


def test_a_throttle_admits_one_push_per_slot_and_counts_the_drops_in_the_queues_slot(on_cluster):
    _away_from_a_slot_boundary()
    first = ClusterThrottled.set(queue="c2").perform_async(1)
    assert first
    assert ClusterThrottled.set(queue="c2").perform_async(2) is None
    assert ClusterThrottled.set(queue="c2").perform_async(3) is None
    assert ClusterThrottled.set(queue="c3").perform_async(4)  # another queue: another key
    assert [payload.loads(raw)["args"] for raw in on_cluster.lrange(CLUSTER.queue("c2"), 0, -1)] == [[1]]
    [slot] = _keys(on_cluster, "{q:c2}:throttle:*")
    assert key_slot(slot) == key_slot(CLUSTER.queue("c2").encode()) and on_cluster.get(slot) == first.encode()
    [(field, count)] = on_cluster.hgetall(CLUSTER.throttle_drops("c2")).items()
    assert count == b"2" and b"ClusterThrottled" in field
    assert not on_cluster.exists(CLUSTER.throttle_drops("c3"))
    _nothing_in_the_one_server_layout(on_cluster)


def test_a_real_worker_runs_a_debounced_burst_once_and_a_throttled_class_once_per_slot(
        on_cluster, redis_cluster, worker_factory):
    for version in range(1, 6):
        ClusterDebounced.set(queue="c0").perform_async(version)
    _away_from_a_slot_boundary(margin=20)
    throttled = [ClusterThrottled.set(queue="c1").perform_async(n) for n in range(4)]
    assert throttled[0] and throttled[1:] == [None, None, None]
    worker = worker_factory("-c", "3", env=worker_env(redis_cluster, QUEUES=QUEUES, CONCURRENCY=3,
                                                      IMPORT_ON_MISS=["tests.jobsapp"]))
    wait_for(lambda: sorted(ran(on_cluster)) == ["debounced:5", "throttled:0"], WAIT, 0.2,
             "the burst once with the last arguments, and the admitted push")
    assert not _schedule(on_cluster, "c0")
    ClusterDebounced.set(queue="c0").perform_async(6)  # after the burst ran: a new burst
    wait_for(lambda: "debounced:6" in ran(on_cluster), WAIT, 0.2, "the next burst")
    assert sorted(ran(on_cluster)) == ["debounced:5", "debounced:6", "throttled:0"]
    assert worker.stop(WAIT) == 0
    out = worker.output()
    assert " ERROR: " not in out and "Traceback" not in out, out[-3000:]
    _nothing_in_the_one_server_layout(on_cluster)
