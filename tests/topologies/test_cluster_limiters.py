"""Every limiter kind on a real Redis Cluster (issue 46 item 3): from job code in real
``manage.py wurk`` processes, each limiter's keys in its own ``{l:<name>}`` slot, a job
over its limit rescheduled into its queue's own schedule set, and the limiter API from
a process that runs no worker (the dashboard's, a view's)."""

from __future__ import annotations

import pytest

from tests.jobsapp.cluster_feature_jobs import (
    KINDS,
    ClusterLimitedJob,
    ClusterOnceAnHourJob,
    ClusterOneAtATimeJob,
)
from tests.support import wait_for
from tests.topologies.cluster_client import ran, worker_env
from wurk_django import limiter, payload
from wurk_django.redis.cluster_layout import CLUSTER

QUEUES = ["c0", "c1", "c2", "c3"]
WAIT = 60.0  # generous: the machine is shared; nothing here asserts a duration


def _env(redis_cluster, **extra) -> dict[str, str]:
    return worker_env(redis_cluster, QUEUES=QUEUES, CONCURRENCY=3, **extra)




def _keys(client, pattern: str) -> set[str]:
    return {key.decode() for key in client.scan_iter(match=pattern, target_nodes=client.PRIMARIES)}


def _clean(out: str) -> None:
    assert " ERROR: " not in out and "Traceback" not in out, out[-3000:]


def test_every_kind_runs_from_job_code_with_its_keys_in_its_own_slot(on_cluster, redis_cluster, worker_factory):
    # Through a dedicated LIMITER_REDIS pool (no URL: the main cluster), so that setting
    # is exercised too; the reschedule test below runs without it.
    for kind in KINDS:
        ClusterLimitedJob.set(queue="c0").perform_async(kind)
    worker = worker_factory("-c", "3", env=_env(redis_cluster, LIMITER_REDIS={"POOL_SIZE": 3}))
    wait_for(lambda: sorted(ran(on_cluster)) == sorted(KINDS), WAIT, 0.2, "every kind's job to run")
    assert worker.stop(WAIT) == 0
    _clean(worker.output())

    names = {kind: chosen.name for kind, chosen in KINDS.items()}
    # Each limiter's metadata and state in {l:<name>}: one slot per limiter.
    for kind, name in names.items():
        assert on_cluster.hget(CLUSTER.limiter_meta(name), "type") == kind.encode()
    assert int(on_cluster.hget(CLUSTER.limiter_stats(names["concurrent"]), "held")) == 1
    assert on_cluster.zcard(CLUSTER.limiter_slots(names["concurrent"])) == 0  # given back
    assert len(_keys(on_cluster, f"{{l:{names['bucket']}}}:b:*")) == 1  # this minute's counter
    assert on_cluster.zcard(CLUSTER.limiter_window(names["window"])) == 1
    assert float(on_cluster.hget(CLUSTER.limiter_leaky(names["leaky"]), "level")) > 0
    assert float(on_cluster.hget(CLUSTER.limiter_points(names["points"]), "points")) < 1000  # 2 spent, a little refilled
    assert {m.decode() for m in on_cluster.smembers(CLUSTER.limiter_list)} == set(names.values())
    for name in names.values():
        slots = {on_cluster.keyslot(key) for key in _keys(on_cluster, f"{{l:{name}}}*")}
        assert slots == {on_cluster.keyslot(CLUSTER.limiter_meta(name))}
    # Nothing in the one-server layout (it would sit in some slot, beside the cluster's).
    assert _keys(on_cluster, "lmtr*") == set()


def test_a_job_over_its_limit_is_rescheduled_into_its_queues_own_schedule_set(on_cluster, redis_cluster,
                                                                              worker_factory):
    first = ClusterOnceAnHourJob.set(queue="c2").perform_async("first")
    worker = worker_factory("-c", "1", env=_env(redis_cluster))
    wait_for(lambda: ran(on_cluster) == ["first"], WAIT, 0.2, "the first job to run")
    second = ClusterOnceAnHourJob.set(queue="c2").perform_async("second")
    wait_for(lambda: on_cluster.zcard(CLUSTER.schedule("c2")) == 1, WAIT, 0.2, "the second job rescheduled")
    assert worker.stop(WAIT) == 0
    _clean(worker.output())

    (raw, at), = on_cluster.zrange(CLUSTER.schedule("c2"), 0, -1, withscores=True)
    job = payload.loads(raw)
    assert job["jid"] == second != first and job["overrated"] == 1 and job["queue"] == "c2"
    assert at > on_cluster.time()[0] + 500  # the limiter's own backoff (600 s)
    assert ran(on_cluster) == ["first"]
    # Handled, not failed: no retry, nothing dead, nothing left in the queue.
    assert on_cluster.zcard(CLUSTER.retry("c2")) == 0 and on_cluster.zcard(CLUSTER.dead("c2")) == 0
    assert on_cluster.llen(CLUSTER.queue("c2")) == 0


def test_a_concurrent_limit_holds_across_two_worker_processes(on_cluster, redis_cluster, worker_factory):
    for n in range(4):
        ClusterOneAtATimeJob.set(queue=QUEUES[n]).perform_async(f"j{n}", 0.3)
    workers = [worker_factory("-c", "2", env=_env(redis_cluster)) for _ in range(2)]
    wait_for(lambda: len(ran(on_cluster)) == 4, WAIT, 0.2, "the four jobs to run")
    for worker in workers:
        assert worker.stop(WAIT) == 0
        _clean(worker.output())
    assert sorted(ran(on_cluster)) == ["j0", "j1", "j2", "j3"]
    assert on_cluster.get("{test}:most") == b"1"  # never two holders at once


def test_the_limiter_api_outside_a_worker_on_a_cluster(on_cluster):
    # A view or a script: no job running, the settings' Redis a cluster node.
    window = limiter.window("cl-api", 2, 60, wait_timeout=0)
    assert window.within_limit(lambda: "ran") == "ran"
    with window.acquire():
        pass
    with pytest.raises(limiter.OverLimit):
        window.within_limit(lambda: "never")
    assert window.status()["used"] == 2
    assert "cl-api" in limiter.names()
    assert on_cluster.exists(CLUSTER.limiter_window("cl-api")) == 1
    window.reset()
    assert window.status()["used"] == 0
    bucket = limiter.bucket("cl-api-bucket", 3, "hour")
    bucket.within_limit(lambda: None, used=2)
    assert bucket.status()["used"] == 2
    points = limiter.points("cl-api-points", 10)
    with points.acquire(estimate=4) as held:
        assert held.points_used(1) == 9
    assert points.available() == 9
    window.delete()
    assert on_cluster.exists(CLUSTER.limiter_meta("cl-api")) == 0
    assert "cl-api" not in limiter.names()
    # A limiter whose metadata expired is swept from {wurk}'s list by names().
    on_cluster.delete(CLUSTER.limiter_meta("cl-api-bucket"))
    assert set(limiter.names()) == {"cl-api-points"}
    assert _keys(on_cluster, "lmtr*") == set()
