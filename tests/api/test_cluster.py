"""The data API on a real Redis Cluster (issue 46 item 3): the sorted-set views merge every
queue's own set, sorted by score as one set would be, and each action goes to the set of
the entry's queue; queues, stats and processes read the cluster layout. The same calls
on one server (the test database) give the same answers, the one-server keys unchanged."""

from __future__ import annotations

import time

import pytest

from tests.api.helpers import job
from tests.support import wurk_settings
from wurk_django import payload
from wurk_django.api import DeadSet, ProcessSet, Queue, RetrySet, ScheduledSet, Stats, StatsHistory, WorkSet
from wurk_django.client import cluster_writer
from wurk_django.client.push import Client
from wurk_django.redis import connection
from wurk_django.redis.cluster_layout import CLUSTER
from wurk_django.server import cluster_heartbeat

QUEUES = ["c0", "c1", "c2", "c3"]


@pytest.fixture
def on_cluster(redis_cluster):
    cluster_writer.forget()
    client = redis_cluster.client()
    with wurk_settings(REDIS_URL=redis_cluster.url(0)):
        connection.reset()
        yield client
    connection.reset()
    client.close()
    cluster_writer.forget()


def _spread(client) -> None:
    """Every queue of QUEUES known, and their slots on more than one primary."""
    client.sadd(CLUSTER.queues, *QUEUES)
    owners = {client.get_node_from_key(CLUSTER.queue(name)).port for name in QUEUES}
    assert len(owners) > 1


def _fill(now: float) -> list[tuple[str, float]]:
    """Two scheduled jobs per queue, their scores interleaved across queues (and one tie)."""
    placed = []
    for i in range(8):
        queue = QUEUES[i % 4]
        score = now + 100 + (i if i != 7 else 6)  # jobs 6 and 7 tie
        ScheduledSet().schedule(score, job(f"s{i}", queue=queue))
        placed.append((f"s{i}", score))
    return placed


def test_the_scheduled_set_merges_every_queues_set_in_score_order(on_cluster, redis_db):
    _spread(on_cluster)
    now = time.time()
    placed = _fill(now)
    assert [on_cluster.zcard(CLUSTER.schedule(q)) for q in QUEUES] == [2, 2, 2, 2]

    merged = ScheduledSet()
    assert merged.merged() and merged.size == 8 and len(merged) == 8
    cluster_order = [entry.jid for entry in merged]
    size, window = merged.window(2, 3, desc=False)
    cluster_window = [entry.jid for entry in window]
    assert size == 8
    for entry in merged:
        assert entry.set_key == CLUSTER.schedule(entry.queue)

    # The same entries in one server's single set: the same order, the same window.
    with wurk_settings(REDIS_URL=_url(redis_db)):
        connection.reset()
        _fill(now)
        single = ScheduledSet()
        assert not single.merged() and single.keys() == ["schedule"]
        assert [entry.jid for entry in single] == cluster_order
        assert [entry.jid for entry in single.window(2, 3, desc=False)[1]] == cluster_window
        assert [entry.jid for entry in single.walk(3, desc=True)] == cluster_order
    connection.reset()
    assert [entry.jid for entry in merged.walk(3, desc=True)] == cluster_order
    assert cluster_order[2:] == ["s5", "s4", "s3", "s2", "s1", "s0"]
    assert set(cluster_order[:2]) == {"s6", "s7"}  # the tie: by member bytes, as one server orders it

    # Lookups across the queues' sets.
    score = dict(placed)["s5"]
    assert [e.jid for e in merged.fetch(score)] == ["s5"]
    assert [e.jid for e in merged.fetch((now, now + 1000), "s2")] == ["s2"]
    assert merged.find_job("s3").set_key == CLUSTER.schedule("c3")
    assert sorted(e.jid for e in merged.scan("s1")) == ["s1"]


def _url(client) -> str:
    kwargs = client.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/{kwargs['db']}"


def test_actions_on_an_entry_go_to_its_queues_set(on_cluster):
    _spread(on_cluster)
    now = time.time()
    _fill(now)
    merged = ScheduledSet()

    entry = merged.find_job("s1")  # in c1's set
    assert entry.reschedule(now + 5000) and on_cluster.zscore(CLUSTER.schedule("c1"), entry.value) == now + 5000
    assert entry.delete() and on_cluster.zcard(CLUSTER.schedule("c1")) == 1 and merged.size == 7

    assert merged.find_job("s2").add_to_queue()
    queued = [payload.loads(raw) for raw in on_cluster.lrange(CLUSTER.queue("c2"), 0, -1)]
    assert [j["jid"] for j in queued] == ["s2"] and merged.size == 6

    assert merged.find_job("s3").kill()
    dead = DeadSet()
    assert [e.jid for e in dead] == ["s3"] and on_cluster.zcard(CLUSTER.dead("c3")) == 1

    assert dead.retry_all() == 1 and dead.size == 0
    assert [payload.loads(raw)["jid"] for raw in on_cluster.lrange(CLUSTER.queue("c3"), 0, -1)] == ["s3"]

    assert merged.kill_all() == 5 and merged.size == 0 and dead.size == 5
    assert {q: on_cluster.zcard(CLUSTER.dead(q)) for q in QUEUES} == {"c0": 2, "c1": 1, "c2": 1, "c3": 1}
    assert dead.clear() and dead.size == 0


def test_the_retry_set_retries_into_the_jobs_queue_and_deletes_by_value(on_cluster):
    _spread(on_cluster)
    retries = RetrySet()
    for n, queue in enumerate(QUEUES):
        retries.schedule(time.time() + 60 + n, job(f"r{n}", queue=queue, retry_count=2, error_class="E"))
    assert retries.size == 4 and on_cluster.zcard(CLUSTER.retry("c2")) == 1
    first = next(iter(retries))
    assert first.jid == "r3" and first.retry()
    pushed = payload.loads(on_cluster.lrange(CLUSTER.queue("c3"), 0, -1)[0])
    assert pushed["jid"] == "r3" and pushed["retry_count"] == 1  # a manual retry does not use one up
    other = retries.find_job("r0")
    assert retries.delete_by_value(other.value) and retries.size == 2
    assert retries.delete_by_jid(retries.find_job("r1").score, "r1") and retries.size == 1


def test_queues_stats_and_history_read_the_cluster_layout(on_cluster):
    _spread(on_cluster)
    for n in range(3):  # written as a worker would find them, enqueued 5 s ago
        on_cluster.lpush(CLUSTER.queue("c0"), payload.dumps(job(f"q{n}", queue="c0", enqueued_at=payload.now_ms() - 5000)))
    Client().push(job("other", queue="c1"))
    RetrySet().schedule(time.time() + 60, job("r", queue="c2"))
    DeadSet().kill(job("d", queue="c3"), notify_failure=False)
    day = time.strftime("%Y-%m-%d", time.gmtime())
    on_cluster.set(CLUSTER.stat("processed"), 41)
    on_cluster.set(CLUSTER.stat("failed"), 2)
    on_cluster.set(CLUSTER.stat_on("processed", day), 7)

    assert [q.name for q in Queue.all()] == QUEUES
    c0 = Queue("c0")
    assert c0.rname == CLUSTER.queue("c0") and c0.size == 3 and c0.latency > 4
    assert [r.jid for r in c0] == ["q2", "q1", "q0"]
    assert c0.find_job("q1").jid == "q1"
    assert c0.delete_job("q1").jid == "q1" and c0.size == 2
    assert c0.find_job("q0").delete() and c0.size == 1
    assert not c0.paused
    on_cluster.set(CLUSTER.paused("c0"), "1")
    assert c0.paused
    c0.unpause()  # the queue's own flag, in its slot
    assert not c0.paused and not on_cluster.exists(CLUSTER.paused("c0"))
    c0.pause()
    assert c0.paused and on_cluster.get(CLUSTER.paused("c0")) == b"1"

    stats = Stats()
    assert (stats.processed, stats.failed) == (41, 2)
    assert (stats.scheduled_size, stats.retry_size, stats.dead_size) == (0, 1, 1)
    assert stats.enqueued == 2 and stats.queues() == {"c0": 1, "c1": 1, "c2": 0, "c3": 0}
    assert [s.paused for s in stats.queue_summaries() if s.name == "c0"] == [True]
    assert StatsHistory(2).processed()[day] == 7
    stats.reset()
    assert on_cluster.get(CLUSTER.stat("processed")) == b"0"

    # A queue cleared keeps its name while its own sets hold entries (c3's dead set).
    Queue("c3").clear()
    Queue("c1").clear()
    assert on_cluster.smembers(CLUSTER.queues) == {b"c0", b"c2", b"c3"}
    assert Queue("c1").size == 0


def test_processes_and_their_work_read_the_process_hashes(on_cluster):
    work = {"t1": payload.dumps({"queue": "c1", "payload": payload.dumps(job("w1", queue="c1")).decode(),
                                 "run_at": time.time()}).decode()}
    info = payload.dumps({"hostname": "h", "pid": 1, "identity": "h:1:n", "queues": ["c1"], "concurrency": 3,
                          "started_at": time.time()}).decode()
    cluster_heartbeat.beat(on_cluster, "h:1:n", {"info": info, "concurrency": 3, "busy": 1}, work, {})
    processes = ProcessSet()
    assert processes.size == 1
    [process] = list(processes)
    assert process.identity == "h:1:n" and process["busy"] == 1 and process.queues == ["c1"]
    assert WorkSet().size == 1
    [(identity, tid, running)] = list(WorkSet())
    assert (identity, tid, running.job.jid) == ("h:1:n", "t1", "w1")
    process.quiet()
    assert on_cluster.lrange(CLUSTER.signals("h:1:n"), 0, -1) == [b"TSTP"]
    # The worker's next beat takes it.
    assert cluster_heartbeat.beat(on_cluster, "h:1:n", {"info": info}, {}, {}) == ["TSTP"]


def test_scan_iter_of_the_cluster_client_covers_every_primary(on_cluster):
    """What a key pattern read across the cluster relies on (the admin's task results list):
    redis-py's RedisCluster.scan_iter walks every primary, not one node."""
    names = [f"status:j{n}" for n in range(40)]
    for name in names:
        on_cluster.set(name, 1)
    holders = {on_cluster.get_node_from_key(name).name for name in names}
    assert len(holders) == len(on_cluster.get_primaries())
    assert sorted(k.decode() for k in on_cluster.scan_iter(match="status:*", count=10)) == sorted(names)
