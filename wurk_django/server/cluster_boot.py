"""What a worker refuses at boot on a Redis Cluster (issue 46 stage 3).

The core worker runs on a cluster (:mod:`.cluster_worker`): fetch, run, retry,
death, scheduled jobs, recovery of a dead process's jobs, heartbeat and stats, the
history rollups, statsd metrics and the health listener (issue 46 item 3).
A feature switched on in the settings (or the command line) that is not converted
to the cluster layout yet would write one-server keys beside the cluster's, or
fail part way with ``CROSSSLOT``: :func:`refusal` names every such feature, and
``manage.py wurk`` exits 1 with that line before anything starts.
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
    "PERIODIC": "periodic jobs (WURK['PERIODIC'])",
    "UNIQUE_JOBS": "unique jobs (WURK['UNIQUE_JOBS'])",
    "LEADER": "leader election (WURK['LEADER'])",
    "MEMORY_LIMIT_MB": "the memory limit (WURK['MEMORY_LIMIT_MB'])",
    "QUEUE_SHARDS": "queue shards (WURK['QUEUE_SHARDS'])",
    "LIMITER_REDIS": "a limiters' Redis (WURK['LIMITER_REDIS'])",
    "SHARDS": "shards (WURK['SHARDS'])",
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
            f"(fetch, retries, scheduled jobs, the dead set, recovery); switch these off, or use one Redis "
            f"primary (Sentinel for failover), see {cluster.DOCS}.")
