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


# -- unique jobs (ENT-203) ----------------------------------------------------------
UNIQUE_PREFIX = "unique:"


def unique_lock(digest: str) -> str:
    """``unique:<sha256 hex of the job's canonical context>``: a STRING holding the owner's jid."""
    return f"{UNIQUE_PREFIX}{digest}"


# -- rate limiters (ENT-110) -----------------------------------------------------------
# The Ruby wurk layout (Sidekiq Enterprise's own is undocumented), so Ruby and
# Python processes share one limiter by name.
LIMITER_LIST = "lmtr-list"  # SET of every registered limiter name (swept when metadata expires)


def limiter_meta(name: str) -> str:
    return f"lmtr:{name}"  # HASH type, options (JSON), fingerprint


def limiter_slots(name: str) -> str:
    return f"lmtr-cs:{name}"  # ZSET concurrent slot id -> expiry epoch


def limiter_stats(name: str) -> str:
    return f"lmtr-stats:{name}"  # HASH concurrent counters


def limiter_bucket(name: str, epoch: int) -> str:
    return f"lmtr-b:{name}:{epoch}"  # STRING count for period floor(now / interval)


def limiter_window(name: str) -> str:
    return f"lmtr-w:{name}"  # ZSET admission times


def limiter_leaky(name: str) -> str:
    return f"lmtr-l:{name}"  # HASH level, last


def limiter_points(name: str) -> str:
    return f"lmtr-p:{name}"  # HASH points, last
