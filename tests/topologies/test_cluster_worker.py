"""``manage.py wurk`` on a real Redis Cluster (3 primaries + 3 replicas), with real worker
processes (issue 46 stage 3): the core path end to end, and a clear refusal at boot for a
feature not converted yet."""

from __future__ import annotations

import urllib.error
import urllib.request

from tests.jobsapp.cluster_jobs import ClusterDoomedJob, ClusterFlakyJob, ClusterRecordJob, ClusterSlowJob
from tests.redis_servers import free_port
from tests.statsd.listener import UDPListener
from tests.support import wait_for
from tests.topologies.cluster_client import ran, worker_env
from wurk_django import payload
from wurk_django.redis.cluster_layout import CLUSTER

QUEUES = ["c0", "c1", "c2", "c3"]
WAIT = 60.0  # generous: the machine is shared; nothing here asserts a duration


def _env(redis_cluster, **extra) -> dict[str, str]:
    return worker_env(redis_cluster, QUEUES=QUEUES, CONCURRENCY=3, **extra)




def _apart(client) -> tuple[str, str]:
    """Two of QUEUES whose slots are on different primaries."""
    owner = {name: client.get_node_from_key(CLUSTER.queue(name)).port for name in QUEUES}
    return QUEUES[0], next(name for name in QUEUES[1:] if owner[name] != owner[QUEUES[0]])


def test_the_core_worker_runs_pushes_retries_scheduled_and_dead_jobs(on_cluster, redis_cluster, worker_factory):
    first, second = _apart(on_cluster)
    for n in range(3):
        ClusterRecordJob.set(queue=first).perform_async(f"{first}-{n}")
        ClusterRecordJob.set(queue=second).perform_async(f"{second}-{n}")
    ClusterFlakyJob.set(queue="c2").perform_async("flaky")
    ClusterRecordJob.set(queue="c3").perform_in(2, "later")
    doomed = ClusterDoomedJob.set(queue="c1").perform_async()
    assert on_cluster.zcard(CLUSTER.schedule("c3")) == 1

    worker = worker_factory("-c", "3", env=_env(redis_cluster))
    expected = {f"{q}-{n}" for q in (first, second) for n in range(3)} | {"flaky", "later"}
    wait_for(lambda: expected <= set(ran(on_cluster)), WAIT, 0.2, "every job to run")
    wait_for(lambda: on_cluster.zcard(CLUSTER.dead("c1")) == 1, WAIT, 0.2, "the doomed job in c1's dead set")

    dead = payload.loads(on_cluster.zrange(CLUSTER.dead("c1"), 0, -1)[0])
    assert dead["jid"] == doomed and dead["retry_count"] == 1
    assert on_cluster.get("{test}:doomed") == b"2"  # its try and its one retry
    assert on_cluster.get("{test}:tries:flaky") == b"2"
    assert sorted(ran(on_cluster)) == sorted(expected)  # each ran once
    assert all(on_cluster.llen(CLUSTER.queue(q)) == 0 for q in QUEUES)
    assert on_cluster.zcard(CLUSTER.retry("c2")) == 0 and on_cluster.zcard(CLUSTER.schedule("c3")) == 0
    identity = wait_for(lambda: on_cluster.smembers(CLUSTER.processes), WAIT, 0.2, "the process listed")
    assert len(identity) == 1

    assert worker.stop(WAIT) == 0
    # The last beat flushed the counters under {stats}; the process left the process set.
    assert int(on_cluster.get(CLUSTER.stat("processed"))) == 11
    assert int(on_cluster.get(CLUSTER.stat("failed"))) == 3
    assert on_cluster.smembers(CLUSTER.processes) == set()
    out = worker.output()  # its last metrics flush, beat and deregistration went through
    assert " ERROR: " not in out and "Traceback" not in out and "shutdown step" not in out, out[-3000:]
    assert not [k for k in on_cluster.scan_iter(match="{q:*}:private|*", target_nodes=on_cluster.PRIMARIES)]


def test_a_job_of_a_worker_killed_mid_run_runs_again_after_a_restart(on_cluster, redis_cluster, worker_factory):
    ClusterSlowJob.set(queue="c0").perform_async("slow", 2)
    first = worker_factory("-c", "2", env=_env(redis_cluster))
    wait_for(lambda: on_cluster.llen("{test}:started") == 1, WAIT, 0.1, "the slow job to start")
    first.kill()
    private = [k for k in on_cluster.scan_iter(match="{q:c0}:private|*", target_nodes=on_cluster.PRIMARIES)]
    assert len(private) == 1 and on_cluster.llen(private[0]) == 1  # the job stayed in Redis
    assert ran(on_cluster) == []

    second = worker_factory("-c", "2", env=_env(redis_cluster))
    wait_for(lambda: ran(on_cluster) == ["slow"], WAIT, 0.2, "the job to run again")
    assert on_cluster.llen("{test}:started") == 2
    assert on_cluster.exists(private[0]) == 0
    assert second.stop(WAIT) == 0


def test_a_custom_fetcher_is_refused_at_boot_by_name(on_cluster, redis_cluster, worker_factory):
    # The one feature a cluster refuses (issue 46 item 3; server/cluster_boot.py says why).
    ClusterRecordJob.set(queue="c0").perform_async("never")
    worker = worker_factory(env=_env(redis_cluster, FETCH_CLASS="wurk_django.server.fetch.basic.BasicFetch"))
    assert worker.wait(WAIT) == 1
    out = worker.output()
    assert "a custom fetcher" in out and "Redis Cluster" in out and "cluster_enabled:1" in out
    assert on_cluster.llen(CLUSTER.queue("c0")) == 1  # nothing fetched


def _get(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_history_statsd_and_the_health_listener_run_on_the_cluster_worker(on_cluster, redis_cluster,
                                                                          worker_factory):
    """Issue 46 item 3: HISTORY, STATSD and HEALTH_PORT switched on, the worker boots on the
    cluster, rolls the history up (queue gauges from the queues' own keys), sends the job
    metrics and the process gauges, and answers /live and /ready."""
    from wurk_django import history

    udp = UDPListener(free_port())
    health = free_port()
    try:
        for n in range(4):
            ClusterRecordJob.set(queue=QUEUES[n]).perform_async(f"m{n}")
        ClusterRecordJob.set(queue="idle").perform_async("waits")  # a queue no worker serves
        worker = worker_factory("-c", "2", env=_env(
            redis_cluster, HISTORY={"ROLLUP_INTERVAL": 5, "SNAPSHOT_INTERVAL": 1},
            STATSD={"HOST": "127.0.0.1", "PORT": udp.port}, HEALTH_PORT=health))
        wait_for(lambda: len(ran(on_cluster)) == 4, WAIT, 0.2, "the jobs to run")
        assert udp.wait_for("sidekiq.jobs.count", 4, timeout=WAIT)  # per-job metrics, one per job
        # The snapshot's queue gauges (every queue of the queue set, idle's one job counted) and
        # the process's own gauges, from the queues' lists in the cluster layout.
        assert "sidekiq.queue.size:1|g|#queue:idle" in udp.wait_for("sidekiq.queue.size:1|g|#queue:idle",
                                                                     timeout=WAIT)
        assert udp.wait_for("sidekiq.queue.size:0|g|#queue:c0,process:", timeout=WAIT)
        assert udp.wait_for("sidekiq.busy:", timeout=WAIT)
        wait_for(lambda: _get(f"http://127.0.0.1:{health}/ready") == 200, WAIT, 0.2, "/ready")
        assert _get(f"http://127.0.0.1:{health}/live") == 200
        # The rollup sampled every queue's list in the cluster layout (idle holds its one job),
        # and the snapshots carry the dashboard totals read across the queues' sets.
        sampled = wait_for(lambda: [q for q in history.queue_history("1m", 300) if q["name"] == "idle"],
                           WAIT, 0.5, "a queue rollup")
        assert max(point["size"] for point in sampled[0]["points"]) == 1
        snapshots = wait_for(lambda: [s for s in history.recent(50) if s.get("processed", 0) >= 4], WAIT, 0.5,
                             "a snapshot after the first beat")
        assert snapshots[-1]["enqueued"] == 1
        assert worker.stop(WAIT) == 0
        out = worker.output()
        assert " ERROR: " not in out and "Traceback" not in out, out[-3000:]
    finally:
        udp.close()


def test_quiet_from_the_busy_page_reaches_the_cluster_worker(on_cluster, redis_cluster, worker_factory):
    from wurk_django.api import ProcessSet

    worker = worker_factory("-c", "1", env=_env(redis_cluster))
    [process] = wait_for(lambda: list(ProcessSet()), WAIT, 0.2, "the process listed")
    process.quiet()
    wait_for(lambda: [p for p in ProcessSet() if p.stopping], WAIT, 0.2, "the process quiet at its next beat")
    process.stop()
    assert worker.wait(WAIT) == 0
    assert on_cluster.smembers(CLUSTER.processes) == set()
