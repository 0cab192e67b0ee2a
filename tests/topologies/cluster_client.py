"""What the Redis Cluster tests share: the settings pointing at the test cluster, with a
client of it, and the cluster writer's cache forgotten before and after (the ``on_cluster``
fixture of tests/topologies/conftest.py, or a test file's own with other settings)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support import wurk_settings
from wurk_django.client import cluster_writer


@contextmanager
def cluster_settings(redis_cluster, node: int = 0, **settings) -> Iterator:
    """``REDIS_URL`` set to node ``node`` of ``redis_cluster`` (a replica's URL too: the client
    finds the primaries), plus ``settings``; yields a cluster client."""
    cluster_writer.forget()
    client = redis_cluster.client()
    try:
        with wurk_settings(REDIS_URL=redis_cluster.url(node), **settings):
            yield client
    finally:
        client.close()
        cluster_writer.forget()


def worker_env(redis_cluster, **settings) -> dict[str, str]:
    """The environment of a test worker process on node 1 of ``redis_cluster`` (a different
    node from the tests' own client), polling the schedule every second, plus ``settings``."""
    return {"WURK_TEST_EXTRA": json.dumps({"REDIS_URL": redis_cluster.url(1), "POLL_INTERVAL_AVERAGE": 1,
                                           **settings})}


def ran(client) -> list[str]:
    """What the cluster test jobs recorded in ``{test}:ran``, in order."""
    return [raw.decode() for raw in client.lrange("{test}:ran", 0, -1)]
