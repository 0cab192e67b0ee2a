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


# -- wake-ups (issue 19): not Sidekiq keys; Ruby processes never read them --------------
#: Most tokens a queue's wake-up list holds: enough to wake that many idle fetchers at once.
WAKE_TOKENS_MAX = 64
#: Seconds a wake-up list outlives its last push (nobody may be listening).
WAKE_TTL = 60
#: Pub/sub channel a push into ``schedule`` or ``retry`` announces its earliest score on.
SCHEDULE_WAKE_CHANNEL = "wake-schedule"


def schedule_wake_channel(db: int | str) -> str:
    """``wake-schedule:<db>``: channels are server-wide, keys are per database."""
    return f"{SCHEDULE_WAKE_CHANNEL}:{db}"


def wake(name: str) -> str:
    """``wake:<queue>``: a LIST of tokens pushed with every push to ``queue:<queue>``;
    fetchers serving several queues block on these lists when all their queues are empty."""
    return f"wake:{name}"


# -- unique jobs (ENT-203) ----------------------------------------------------------
UNIQUE_PREFIX = "unique:"


def unique_lock(digest: str) -> str:
    """``unique:<sha256 hex of the job's canonical context>``: a STRING holding the owner's jid."""
    return f"{UNIQUE_PREFIX}{digest}"
# -- batches (PRO-201; Sidekiq Pro's layout) -----------------------------------------
BATCHES = "batches"  # ZSET of bids, score = created_at
DEAD_BATCHES = "dead-batches"  # ZSET of bids, score = when the batch was marked dead
#: Suffixes of a batch's own keys (``b-<bid>-<suffix>``). ``notify``, ``cbsucc``,
#: ``tags`` and ``failinfo`` are only ever written by Sidekiq Pro; they are listed so
#: that expiry and deletion also cover a batch Pro created.
BATCH_SUFFIXES = ("jids", "failed", "died", "complete", "success", "death", "notify", "cbsucc", "kids",
                  "pkids", "tags", "failinfo")


def batch(bid: str, suffix: str | None = None) -> str:
    """``b-<bid>`` (the hash), or ``b-<bid>-<suffix>``."""
    return f"b-{bid}" if suffix is None else f"b-{bid}-{suffix}"


def batch_keys(bid: str) -> list[str]:
    """Every key a batch may own: the hash first, then each suffix."""
    return [f"b-{bid}", *(f"b-{bid}-{s}" for s in BATCH_SUFFIXES)]


def batch_tag(tag: str) -> str:
    return f"tags:{tag}"
