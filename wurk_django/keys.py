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


# -- leader election (ENT-301..309) -----------------------------------------------------
# LEADER ("dear-leader") above holds the leader's identity.
LEADER_TOKEN = "leader-token"  # INCR'd at each promotion: the fencing token of a term
LEADER_INFO = "leader-info"  # HASH identity, since, token of the current term, with the lock's TTL (wurk_django only)


# -- periodic jobs (ENT-401..415) -------------------------------------------------------
PERIODIC = "periodic"  # SET of loop ids (lids)


def loop(lid: str) -> str:
    """HASH schedule, klass, options, tz, paused, lf (last fire), nf (next fire)."""
    return f"loops:{lid}"


def loop_history(lid: str) -> str:
    """LIST of JSON [fired_at, jid], newest first, at most 25."""
    return f"loop-history:{lid}"
