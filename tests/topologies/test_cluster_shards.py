"""A shard that is a Redis Cluster, and a cluster beside one-server shards (issue 46 item 6,
docs/redis.md "Shards and a cluster"), on the real test cluster with real worker processes:
pushes routed to the cluster shard land in the cluster layout, ``manage.py wurk --shard``
runs the cluster worker on it (its jobs' own Redis being that shard), and a worker whose
default Redis is the cluster boots with ``SHARDS`` set."""

from __future__ import annotations

import json

import pytest

from tests.jobsapp.cluster_jobs import ClusterRecordJob
from tests.support import wait_for, wurk_settings
from wurk_django import via
from wurk_django.client import cluster_writer
from wurk_django.redis.cluster_layout import CLUSTER

WAIT = 60.0  # generous: the machine is shared; nothing here asserts a duration


@pytest.fixture
def cluster_client(redis_cluster):
    cluster_writer.forget()
    client = redis_cluster.client()
    yield client
    client.close()
    cluster_writer.forget()


def _ran(client) -> list[str]:
    return sorted(raw.decode() for raw in client.lrange("{test}:ran", 0, -1))


def test_a_worker_started_with_shard_runs_the_jobs_of_a_shard_that_is_a_cluster(redis_db, redis_cluster,
                                                                             cluster_client, worker_factory):
    sharding = {"SHARDS": {"big": redis_cluster.url(1)}, "QUEUE_SHARDS": {"c1": "big"}}
    with wurk_settings(**sharding):
        with via("big"):
            ClusterRecordJob.set(queue="c0").perform_async("via")
        ClusterRecordJob.set(queue="c1").perform_async("routed")  # QUEUE_SHARDS
        ClusterRecordJob.set(queue="c2").perform_async("default")  # stays on the default Redis
    assert cluster_client.llen(CLUSTER.queue("c0")) == 1 and cluster_client.llen(CLUSTER.queue("c1")) == 1
    assert redis_db.llen("queue:c2") == 1 and not redis_db.exists("queue:c0", "queue:c1")

    settings = {**sharding, "QUEUES": ["c0", "c1", "c2"], "POLL_INTERVAL_AVERAGE": 1, "CONCURRENCY": 3}
    worker = worker_factory("--shard", "big", env={"WURK_TEST_EXTRA": json.dumps(settings)})
    # The jobs record through redis_client(): inside a job that is the worker's shard, the cluster.
    wait_for(lambda: _ran(cluster_client) == ["routed", "via"], WAIT, 0.2, "both cluster jobs to run")
    assert worker.stop(WAIT) == 0
    out = worker.output()
    assert "started on a Redis Cluster" in out and "Traceback" not in out, out[-3000:]
    assert redis_db.llen("queue:c2") == 1  # the default Redis's job is not this worker's
    assert cluster_client.smembers(CLUSTER.processes) == set()  # it left the cluster's process set


def test_a_worker_on_a_cluster_default_boots_with_one_server_shards_beside_it(redis_db, redis_cluster,
                                                                             cluster_client, worker_factory):
    settings = {"REDIS_URL": redis_cluster.url(0), "SHARDS": {"small": _url(redis_db)},
                "QUEUE_SHARDS": {"legacy": "small"}, "QUEUES": ["c0"], "POLL_INTERVAL_AVERAGE": 1,
                "CONCURRENCY": 3}
    with wurk_settings(**settings):
        ClusterRecordJob.set(queue="c0").perform_async("on the cluster")
    worker = worker_factory(env={"WURK_TEST_EXTRA": json.dumps(settings)})
    wait_for(lambda: _ran(cluster_client) == ["on the cluster"], WAIT, 0.2, "the job to run")
    assert worker.stop(WAIT) == 0
    assert "started on a Redis Cluster" in worker.output()


def _url(client) -> str:
    kwargs = client.connection_pool.connection_kwargs
    return f"redis://{kwargs['host']}:{kwargs['port']}/{kwargs['db']}"
