"""Every Redis key wurk writes or reads, in one place.

The layout is Sidekiq's (and Sidekiq Pro/Enterprise's), so Ruby processes can
share the database: change nothing here without checking the spec's key table.
Fixed keys are constants; keys with a part are functions. A feature keeps its
keys in its own section below.
"""

from __future__ import annotations

# -- core (CORE-060..079) ------------------------------------------------------------
QUEUES = "queues"  # SET of queue names
SCHEDULE = "schedule"  # ZSET, score = run at
RETRY = "retry"  # ZSET, score = next try
DEAD = "dead"  # ZSET, score = died at
PROCESSES = "processes"  # SET of process identities
PAUSED = "paused"  # SET of paused queue names (Pro)
STAT_PROCESSED = "stat:processed"
STAT_FAILED = "stat:failed"
LEADER = "dear-leader"  # Enterprise leader lock


def queue(name: str) -> str:
    return f"queue:{name}"


def stat_processed_on(day: str) -> str:
    return f"stat:processed:{day}"


def stat_failed_on(day: str) -> str:
    return f"stat:failed:{day}"


def work(identity: str) -> str:
    return f"{identity}:work"


def signals_list(identity: str) -> str:
    return f"{identity}-signals"


# -- historical metrics (ENT-501..506) -------------------------------------------------
HISTORY_STREAM = "history:metrics"  # STREAM of cluster snapshots
HISTORY_LOCK = "history-rollup-lock"  # who rolls up when no leader election runs


def throughput_rollup(bucket: str, start: int) -> str:
    """``jr|<1m|5m|1h>|<epoch of the bucket start>``: HASH p, f, ms summed over classes."""
    return f"jr|{bucket}|{start}"


def queue_rollup(bucket: str, start: int) -> str:
    """``qm|<1m|5m|1h>|<epoch of the bucket start>``: HASH ``<queue>|sz`` and ``<queue>|lt``."""
    return f"qm|{bucket}|{start}"
