"""What a worker refuses at boot on a Redis Cluster (issue 46 stage 3).

The core worker runs on a cluster (:mod:`.cluster_worker`): fetch, run, retry,
death, scheduled jobs, recovery of a dead process's jobs, heartbeat and stats; and
(issue 46 item 3) unique jobs, batches, paused queues, result records, leader election,
periodic jobs, every limiter kind (also on a dedicated ``LIMITER_REDIS``), the history
rollups, statsd metrics and the health listener; capsules (``CAPSULES``/``--capsule``),
queue limits (``QUEUE_LIMITS``, :mod:`wurk_django.queue_limits.cluster`), ``--burst``,
``--max-jobs``, and a swarm (``SWARM``/``--processes``: each child a cluster worker) with
its memory recycling (``MEMORY_LIMIT_MB``).

What is left refused is a custom fetcher (``FETCH_CLASS``): a fetcher of the user's own
is written against the one-server layout (Sidekiq's ``queue:<name>`` keys, one command
over several queues, private lists the one-server reaper knows), and the worker cannot
tell what keys it touches; on a cluster it would read queues nobody pushes to, or fail
with ``CROSSSLOT``. :func:`refusal` names it, and ``manage.py wurk`` exits 1 with that
line before anything starts.

``SHARDS`` and ``QUEUE_SHARDS`` are not refused (issue 46 item 6): a shard may be a
cluster, and a worker on one (``manage.py wurk --shard <name>``, or a default Redis that
is a cluster beside other shards) serves that cluster only; what its jobs push to
another shard goes through the push door's routing, as from any process.
"""

from __future__ import annotations

from typing import Any

from ..conf import DEFAULTS, Config
from ..redis import cluster

#: Settings whose non-default value switches on a feature that cannot run on a cluster.
UNCONVERTED = {
    "FETCH_CLASS": "a custom fetcher (WURK['FETCH_CLASS'])",
}


def enabled(raw: dict[str, Any], config: Config | None = None) -> list[str]:
    """The refused features ``raw`` (``settings.WURK``) switches on. ``config`` (the
    command line's) is accepted for the callers' sake: no command-line option is refused."""
    return [label for key, label in UNCONVERTED.items()
            if key in raw and raw[key] is not None and raw[key] != DEFAULTS.get(key)]


def refusal(raw: dict[str, Any], config: Config, *, swarm: bool = False, burst: bool = False) -> str | None:
    """The one line ``manage.py wurk`` exits 1 with on a cluster, or ``None`` (the worker
    runs). ``swarm`` and ``burst`` run on a cluster (issue 46 item 3), and are accepted
    for the callers' sake."""
    features = enabled(raw, config)
    if not features:
        return None
    listed = ", ".join(features)
    return (f"a worker with {listed} does not run on a Redis Cluster: Redis at {cluster.shown(config.redis_url)} "
            f"is a cluster node (cluster_enabled:1), and a fetcher of your own is written for one server's "
            f"keys (queue:<name>, one command over several queues), which a cluster spreads over hash slots. "
            f"Leave FETCH_CLASS unset (the cluster's reliable fetch runs every feature), or use one Redis "
            f"primary (Sentinel for failover), see {cluster.DOCS}.")
