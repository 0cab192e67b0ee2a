"""The client of callers that name their keys through a layout (issue 46 item 3).

The data API, the admin's core pages, the metrics and history readers take the
Redis of the settings as it is: one server, or a Redis Cluster. They name every
key through :func:`~wurk_django.redis.cluster_layout.layout_of` the client they
hold, so one code path reads both; this module hands them that client
(:func:`layout_client`) and a client for a ``MULTI`` within one slot
(:func:`one_slot`). Code that names Sidekiq's keys directly keeps
:func:`wurk_django.context.redis`, which refuses a cluster with a clear error.
"""

from __future__ import annotations

from typing import Any

from .. import context


def layout_client(explicit: Any = None) -> Any:
    """``explicit`` when given; else the running job's own client when the job runs on
    the current config (a cluster worker's ``RedisCluster``); else the process's
    ``RedisCluster`` when the config's Redis is a cluster node (asked once per process),
    else the process-wide client, as :func:`wurk_django.context.redis`."""
    if explicit is not None:
        return explicit
    config = context.config()
    running = context.running()
    if running is not None and running.config is config:
        return running.redis
    from .connection import cluster_for

    clustered = cluster_for(config)
    return clustered if clustered is not None else context.redis_for(config)


def is_cluster(client: Any) -> bool:
    """Whether ``client`` is redis-py's ``RedisCluster``."""
    from redis.cluster import RedisCluster

    return isinstance(client, RedisCluster)


def one_slot(client: Any, key: str) -> Any:
    """A client that runs a ``MULTI`` over keys of ``key``'s slot: ``client`` itself on one
    server; on a cluster, the plain client of the primary serving that slot (redis-py's
    ``RedisCluster`` pipelines have no transactions in every version wurk supports)."""
    if is_cluster(client):
        return client.get_redis_connection(client.get_node_from_key(key))
    return client
