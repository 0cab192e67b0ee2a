"""A retry from the morgue on a real Redis Cluster (issue 46 item 3): a batch whose dead jobs
all come back from the dead set is live again, its death flag cleared and the batch taken out
of the fleet's ``{wurk}:dead-batches`` index, as ``push.lua`` does on one server; while one of
its jobs is still dead it stays there. The jobs die under a real ``manage.py wurk`` worker."""

from __future__ import annotations

from tests.jobsapp.cluster_jobs import ClusterRecordJob
from tests.jobsapp.cluster_morgue_jobs import ClusterStraightToTheMorgue
from tests.support import wait_for
from tests.topologies.cluster_client import ran, worker_env
from wurk_django.api import DeadSet
from wurk_django.redis.cluster_layout import CLUSTER

WAIT = 60.0


def test_retrying_a_batchs_dead_jobs_from_the_morgue_takes_it_out_of_the_dead_batches_index(
        on_cluster, redis_cluster, worker_factory):
    from wurk_django.batch import Batch

    batch = Batch()
    with batch.jobs():
        ClusterRecordJob.set(queue="c0").perform_async("fine")
        ClusterStraightToTheMorgue.set(queue="c1").perform_async("doomed-1")
        ClusterStraightToTheMorgue.set(queue="c2").perform_async("doomed-2")
    worker = worker_factory("-c", "2", env=worker_env(redis_cluster, QUEUES=["c0", "c1", "c2"], CONCURRENCY=2,
                                                      IMPORT_ON_MISS=["tests.jobsapp"]))
    wait_for(lambda: DeadSet().size == 2, WAIT, 0.2, "both doomed jobs dead")
    assert worker.stop(WAIT) == 0  # nothing runs the retried jobs: the index is read as they left it
    bid = batch.bid
    assert batch.status.dead and on_cluster.zscore(CLUSTER.dead_batches, bid) is not None

    first, second = sorted(DeadSet(), key=lambda entry: entry.queue)
    assert first.retry()  # one of two dead jobs back: the batch is still dead
    assert batch.status.dead and on_cluster.zscore(CLUSTER.dead_batches, bid) is not None
    assert second.retry()  # the last: live again, out of the index
    assert not batch.status.dead and on_cluster.zscore(CLUSTER.dead_batches, bid) is None
    assert on_cluster.hget(CLUSTER.batch(bid), "death") is None
    assert on_cluster.llen(CLUSTER.queue("c1")) == 1 and on_cluster.llen(CLUSTER.queue("c2")) == 1
    assert sorted(ran(on_cluster)) == ["doomed-1", "doomed-2", "fine"]
