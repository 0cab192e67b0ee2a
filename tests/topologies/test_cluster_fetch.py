"""The worker's steps on a real Redis Cluster (issue 46 stage 3): the per-queue reliable
fetch (wurk_django.server.fetch.cluster), the reaper's recovery of a dead process's
private lists (cluster_reaper) and the heartbeat in the cluster layout (cluster_heartbeat)."""

from __future__ import annotations

import os
import time

import pytest

from tests.topologies.cluster_client import cluster_settings
from wurk_django import context, payload
from wurk_django.client.writer import Writer
from wurk_django.redis.cluster_layout import CLUSTER
from wurk_django.server import cluster_heartbeat, cluster_reaper
from wurk_django.server.fetch.cluster import ClusterFetch


@pytest.fixture
def on_cluster(redis_cluster):
    with cluster_settings(redis_cluster, QUEUES=["q0", "q1", "q2", "q3"]) as client:
        yield client


def _push(queue: str, jid: str) -> None:
    Writer().write([{"class": "Nothing", "args": [], "queue": queue, "jid": jid}])


def _two_queues_on_different_primaries(client) -> tuple[str, str]:
    names = [f"q{n}" for n in range(4)]
    owner = {name: client.get_node_from_key(CLUSTER.queue(name)).port for name in names}
    first = names[0]
    second = next(name for name in names[1:] if owner[name] != owner[first])
    return first, second


def test_a_job_moves_into_the_private_list_of_its_queue_and_leaves_it_at_the_ack(on_cluster):
    fetcher = ClusterFetch(context.config())
    _push("q2", "j1")
    unit = fetcher.retrieve_work()
    assert unit is not None and unit.queue == "q2"
    assert payload.loads(unit.job)["jid"] == "j1"
    assert unit.private.startswith("{q:q2}:private|")
    assert on_cluster.lrange(unit.private, 0, -1) == [unit.job]
    assert on_cluster.llen(CLUSTER.queue("q2")) == 0
    unit.acknowledge()
    # Parked on the thread that fetched it: it rides that thread's next fetch, or its flush.
    assert on_cluster.lrange(unit.private, 0, -1) == [unit.job]
    fetcher.flush_acks()
    assert on_cluster.exists(unit.private) == 0


def test_queues_on_different_primaries_are_all_drained_by_one_fetcher(on_cluster):
    first, second = _two_queues_on_different_primaries(on_cluster)
    fetcher = ClusterFetch(context.config())
    for n in range(3):
        _push(first, f"a{n}")
        _push(second, f"b{n}")
    seen = []
    for _ in range(6):
        unit = fetcher.retrieve_work()
        assert unit is not None
        seen.append(payload.loads(unit.job)["jid"])
        unit.acknowledge()
    assert sorted(seen) == ["a0", "a1", "a2", "b0", "b1", "b2"]
    assert fetcher.retrieve_work() is None  # idle: one block timeout on one queue, then None
    # The walk that found every queue empty carried the parked ACKs: no job is left behind.
    assert not list(on_cluster.scan_iter(match="{q:*}:private|*", target_nodes=on_cluster.PRIMARIES))


def test_an_idle_fetch_blocks_and_takes_a_job_pushed_meanwhile(on_cluster):
    fetcher = ClusterFetch(context.config())
    assert fetcher.retrieve_work() is None  # blocked on q0, the next idle fetch blocks on q1
    _push("q1", "late")
    unit = fetcher.retrieve_work()
    assert unit is not None and payload.loads(unit.job)["jid"] == "late"


def test_a_requeued_job_goes_back_to_the_fetch_end_once(on_cluster):
    fetcher = ClusterFetch(context.config())
    _push("q0", "first")
    _push("q0", "second")
    unit = fetcher.retrieve_work()
    assert payload.loads(unit.job)["jid"] == "first"
    unit.requeue()
    unit.requeue()  # already back: not pushed twice
    assert on_cluster.llen(CLUSTER.queue("q0")) == 2
    again = fetcher.retrieve_work()
    assert payload.loads(again.job)["jid"] == "first"


def test_the_reaper_moves_a_dead_process_jobs_back_and_leaves_a_live_one(on_cluster):
    config = context.config()
    dead = ClusterFetch(config)
    dead.pid = 999_999_1  # another (dead) process: its lists carry its pid
    live = ClusterFetch(config)
    live.pid = os.getpid()  # this host, this nonce: a fork sibling whose pid runs (issue 46 item 3)
    _push("q0", "lost1")
    _push("q3", "lost2")
    lost = [dead.retrieve_work(), dead.retrieve_work()]
    _push("q1", "running")
    running = live.retrieve_work()
    assert all(lost) and running is not None
    from wurk_django.server.state import NONCE, hostname

    live_identity = f"{hostname()}:{live.pid}:{NONCE}"
    cluster_heartbeat.beat(on_cluster, live_identity, {"info": "{}"}, {}, {})

    moved = cluster_reaper.recover(on_cluster)

    assert moved == 2
    back = {payload.loads(raw)["jid"] for q in ("q0", "q3") for raw in on_cluster.lrange(CLUSTER.queue(q), 0, -1)}
    assert back == {"lost1", "lost2"}
    assert all(on_cluster.exists(unit.private) == 0 for unit in lost)
    assert on_cluster.lrange(running.private, 0, -1) == [running.job]  # its owner beats


def test_a_fork_sibling_is_judged_by_its_pid_alone(on_cluster):
    # Issue 46 item 3, the one-server reaper's first rule: this host and this nonce (a swarm's
    # child) is alive while its pid runs, whatever its hash says; another nonce keeps the hash rule.
    from wurk_django.server.state import NONCE, hostname

    gone_pid = 999_999_3
    booting = f"{hostname()}:{os.getpid()}:{NONCE}"  # no hash yet: fetched before its first beat
    killed = f"{hostname()}:{gone_pid}:{NONCE}"
    cluster_heartbeat.beat(on_cluster, killed, {"info": "{}"}, {}, {})  # its hash not expired yet
    stranger = f"{hostname()}:{gone_pid}:another-nonce"
    cluster_heartbeat.beat(on_cluster, stranger, {"info": "{}"}, {}, {})
    assert cluster_reaper.sibling_pid(booting) == os.getpid() and cluster_reaper.sibling_pid(stranger) is None
    assert cluster_reaper.alive(on_cluster, booting)
    assert not cluster_reaper.alive(on_cluster, killed)
    assert cluster_reaper.alive(on_cluster, stranger)  # no pid scope recorded: its hash decides


def test_processes_whose_hash_expired_leave_the_process_set(on_cluster):
    cluster_heartbeat.beat(on_cluster, "h:1:alive", {"info": "{}"}, {}, {})
    on_cluster.sadd(CLUSTER.processes, "h:2:killed")  # listed, its hash gone (kill -9, then its TTL)
    assert cluster_reaper.prune_processes(on_cluster) == 1
    assert on_cluster.smembers(CLUSTER.processes) == {b"h:1:alive"}


def test_private_list_names_parse_back_to_queue_and_owner():
    key = CLUSTER.private_queue("a}b%", "web-1", 42, "n0nce", 3)
    assert cluster_reaper.parse(key) == ("a}b%", "web-1:42:n0nce")
    assert cluster_reaper.parse("{q:x}:queue") is None


def test_a_beat_writes_the_process_and_the_counters_in_the_cluster_layout(on_cluster):
    cluster_heartbeat.beat(on_cluster, "h:1:n", {"info": "{}", "busy": 1}, {"t1": "{}"},
                           {"processed": 3, "failed": 1})
    assert on_cluster.sismember(CLUSTER.processes, "h:1:n")
    assert on_cluster.hget(CLUSTER.process("h:1:n"), "busy") == b"1"
    assert 0 < on_cluster.ttl(CLUSTER.process("h:1:n")) <= cluster_heartbeat.TTL
    assert on_cluster.hgetall(CLUSTER.work("h:1:n")) == {b"t1": b"{}"}
    assert on_cluster.get(CLUSTER.stat("processed")) == b"3"
    assert on_cluster.get(CLUSTER.stat("failed")) == b"1"
    day = time.strftime("%Y-%m-%d", time.gmtime())
    assert on_cluster.get(CLUSTER.stat_on("processed", day)) == b"3"
    cluster_heartbeat.deregister(on_cluster, "h:1:n")
    assert not on_cluster.sismember(CLUSTER.processes, "h:1:n")
