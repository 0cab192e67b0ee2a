"""``Status.delete()`` of a batch on a real Redis Cluster (issue 46 item 3): the one-server
script spans the batch's, the indexes', its parent's and its tags' keys; on a cluster one
step per slot (wurk_django/batch/scripts.py). Then a real worker runs what was queued."""

from __future__ import annotations

from tests.jobsapp.cluster_jobs import ClusterRecordJob
from tests.support import wait_for
from tests.topologies.cluster_client import ran, worker_env
from wurk_django.redis.cluster_layout import CLUSTER

CALLBACKS = "tests.jobsapp.cluster_jobs.ClusterBatchCallbacks"
WAIT = 60.0


def _callbacks(client) -> list[str]:
    return [raw.decode() for raw in client.lrange("{test}:callbacks", 0, -1)]


def test_a_deleted_child_batch_leaves_its_parent_indexes_and_tags_and_never_fires(on_cluster, redis_cluster,
                                                                                  worker_factory):
    from wurk_django.batch import Batch

    parent = Batch()
    parent.callback_queue = "cb"
    parent.on("success", CALLBACKS, {"tag": "parent"})
    with parent.jobs():
        ClusterRecordJob.set(queue="c0").perform_async("p")
        child = Batch()
        child.tags = ["red"]
        child.callback_queue = "c3"
        child.on("success", CALLBACKS, {"tag": "child"})
        with child.jobs():
            ClusterRecordJob.set(queue="c2").perform_async("k")
    bid = child.bid
    assert on_cluster.sismember(CLUSTER.batch(parent.bid, "kids"), bid)
    assert on_cluster.sismember(CLUSTER.batch_tag("red"), bid)
    assert on_cluster.exists(CLUSTER.batch(bid)) == 1

    child.status.delete()
    assert on_cluster.exists(*CLUSTER.batch_keys(bid)) == 0  # every own key, in its slot
    assert not on_cluster.sismember(CLUSTER.batch(parent.bid, "kids"), bid)
    assert not on_cluster.sismember(CLUSTER.batch(parent.bid, "pkids"), bid)
    assert not on_cluster.sismember(CLUSTER.batch_tag("red"), bid)
    assert on_cluster.zscore(CLUSTER.batches, bid) is None
    assert on_cluster.zscore(CLUSTER.batches, parent.bid) is not None
    child.status.delete()  # again: each step repeats harmlessly

    # The deleted batch's job still runs (its ACK goes into nothing); the parent, no longer
    # waiting on the child, succeeds once; the child never fires.
    worker = worker_factory("-c", "2", env=worker_env(redis_cluster, QUEUES=["c0", "c2", "c3", "cb"]))
    wait_for(lambda: sorted(ran(on_cluster)) == ["k", "p"], WAIT, 0.2, "both jobs")
    wait_for(lambda: _callbacks(on_cluster) == [f"success:{parent.bid}:parent"], WAIT, 0.2, "the parent's success")
    assert worker.stop(WAIT) == 0
    assert _callbacks(on_cluster) == [f"success:{parent.bid}:parent"]
    assert "Traceback" not in worker.output(), worker.output()[-3000:]
