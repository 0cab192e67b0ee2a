"""What a worker refuses at boot on a Redis Cluster (issue 46 stage 3).

The core worker runs on a cluster (:mod:`.cluster_worker`): fetch, run, retry,
death, scheduled jobs, recovery of a dead process's jobs, heartbeat and stats; and
(issue 46 item 3) unique jobs, batches, paused queues, result records, leader election,
periodic jobs, every limiter kind (also on a dedicated ``LIMITER_REDIS``), the history
rollups, statsd metrics and the health listener.
A feature switched on in the settings (or the command line) that is not converted
to the cluster layout yet would write one-server keys beside the cluster's, or
fail part way with ``CROSSSLOT``: :func:`refusal` names every such feature, and
``manage.py wurk`` exits 1 with that line before anything starts.

``SHARDS`` and ``QUEUE_SHARDS`` are not refused (issue 46 item 6): a shard may be a
cluster, and a worker on one (``manage.py wurk --shard <name>``, or a default Redis that
is a cluster beside other shards) serves that cluster only; what its jobs push to
another shard goes through the push door's routing, as from any process.
"""

from __future__ import annotations

from typing import Any

from ..conf import DEFAULTS, Config
from ..redis import cluster

#: Settings whose non-default value switches on a feature not converted to a cluster yet.
UNCONVERTED = {
    "CAPSULES": "capsules (WURK['CAPSULES'] or --capsules)",
    "SWARM": "a swarm (WURK['SWARM'] or --processes)",
    "FETCH_CLASS": "a custom fetcher (WURK['FETCH_CLASS'])",
    "QUEUE_LIMITS": "queue limits (WURK['QUEUE_LIMITS'])",
    "MEMORY_LIMIT_MB": "the memory limit (WURK['MEMORY_LIMIT_MB'])",
}


def enabled(raw: dict[str, Any], config: Config | None = None) -> list[str]:
    """The unconverted features ``raw`` (``settings.WURK``) switches on, and those ``config``
    (the command line's) does: capsules."""
    out = [label for key, label in UNCONVERTED.items()
           if key in raw and raw[key] is not None and raw[key] != DEFAULTS.get(key)]
    if config is not None:
        if len(getattr(config, "capsules", None) or {}) > 0 and UNCONVERTED["CAPSULES"] not in out:
            out.append(UNCONVERTED["CAPSULES"])
    return out


def refusal(raw: dict[str, Any], config: Config, *, swarm: bool = False, burst: bool = False) -> str | None:
    """The one line ``manage.py wurk`` exits 1 with on a cluster, or ``None`` (the core worker runs)."""
    features = enabled(raw, config)
    if swarm and UNCONVERTED["SWARM"] not in features:
        features.append(UNCONVERTED["SWARM"])
    if burst:
        features.append("--burst")
    if not features:
        return None
    listed = ", ".join(features)
    return (f"a worker with {listed} does not run on a Redis Cluster yet: Redis at {cluster.shown(config.redis_url)} "
            f"is a cluster node (cluster_enabled:1). The worker runs there with the core features only "
            f"(fetch, retries, scheduled jobs, the dead set, recovery, unique jobs, batches, paused queues, "
            f"results); switch these off, or use one Redis primary (Sentinel for failover), see {cluster.DOCS}.")
