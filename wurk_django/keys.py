"""Every Redis key wurk writes or reads, in one place.

The layout is Sidekiq's (and Sidekiq Pro/Enterprise's), so Ruby processes can
share the database: change nothing here without checking the spec's key table.
Fixed keys are constants; keys with a part are functions. A feature keeps its
keys in its own section below.

This module imports nothing from wurk_django, so any module may import it.
"""

from __future__ import annotations

from datetime import UTC, date, datetime

# -- core: the keys Sidekiq itself writes (CORE-060..079) --------------------------------
QUEUES = "queues"  # SET of queue names
SCHEDULE = "schedule"  # ZSET, score = run at
RETRY = "retry"  # ZSET, score = next try
DEAD = "dead"  # ZSET, score = died at
PROCESSES = "processes"  # SET of process identities
PAUSED = "paused"  # SET of paused queue names (Pro)
STAT_PROCESSED = "stat:processed"
STAT_FAILED = "stat:failed"
STAT_EXPIRED = "stat:expired"  # jobs skipped past their expires_in (Sidekiq Pro, Ruby wurk)
LEADER = "dear-leader"  # Enterprise leader lock
PROCESS_CLEANUP = "process_cleanup"  # lock: one process at a time prunes PROCESSES
PROFILES = "profiles"  # ZSET of "<token>-<jid>" profile hashes, score = expiry

QUEUE_PREFIX = "queue:"


def queue(name: str) -> str:
    """The LIST of jobs waiting in queue ``name`` (``LPUSH`` in, ``RPOP``/``LMOVE`` out)."""
    return f"{QUEUE_PREFIX}{name}"


def stat(kind: str) -> str:
    """The all-time counter ``stat:processed``, ``stat:failed`` or ``stat:expired``."""
    return f"stat:{kind}"


def stat_on(kind: str, day: str) -> str:
    """The per-day counter ``stat:<kind>:<YYYY-MM-DD>``."""
    return f"stat:{kind}:{day}"


def stat_processed_on(day: str) -> str:
    return stat_on("processed", day)


def stat_failed_on(day: str) -> str:
    return stat_on("failed", day)


def process(identity: str) -> str:
    """A process's heartbeat HASH: its key is the identity ``<host>:<pid>:<nonce>`` itself."""
    return identity


def work(identity: str) -> str:
    """HASH thread id -> the job that thread runs, rewritten by every heartbeat."""
    return f"{identity}:work"


def workers(identity: str) -> str:
    """The same HASH under Sidekiq 6's name, which its Busy page reads (written with
    ``WIRE_FORMAT`` 6 or 7; Sidekiq 7 and later read :func:`work`)."""
    return f"{identity}:workers"


def signals_list(identity: str) -> str:
    """LIST of signals (``TSTP``, ``TERM``, ``TTIN``) the dashboard sends a process."""
    return f"{identity}-signals"


def iteration(jid: str) -> str:
    """HASH of an iterable job's saved cursor and counters."""
    return f"it-{jid}"


def _utc(moment: datetime) -> datetime:
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def metrics_minute(moment: datetime) -> str:
    """Per-minute job metrics HASH ``j|%y%m%d|%-H:%M``, e.g. ``j|250214|8:43``."""
    moment = _utc(moment)
    return f"j|{moment:%y%m%d}|{moment.hour}:{moment:%M}"


def metrics_ten_minutes(moment: datetime) -> str:
    """The minute key minus its last character: ``j|250214|8:4`` covers 8:40-8:49."""
    return metrics_minute(moment)[:-1]


def metrics_histogram(klass: str, moment: datetime) -> str:
    """Execution-time histogram (BITFIELD) ``h|<class>-<%-d>-<%-H>:<%-M>``, no padding."""
    moment = _utc(moment)
    return f"h|{klass}-{moment.day}-{moment.hour}:{moment.minute}"


def deploy_marks(day: date) -> str:
    """HASH ISO minute -> label of the deploys marked on one UTC day."""
    return f"{day:%Y%m%d}-marks"


def deploy_lock(label: str) -> str:
    """Short lock so one deploy is marked once however many processes report it."""
    return f"deploylock-{label}"


# -- Pro: reliable fetch (PRO-100..155) ----------------------------------------------
REAPER_LOCK = "super_fetch:reaper"  # one reaper sweep at a time across the cluster
REAPER_FULL_LOCK = "super_fetch:reaper:full"  # one full (every queue) sweep at a time
# Taken by one of our processes while another runtime (a Ruby wurk process, which sweeps only
# its own queues) holds REAPER_LOCK, so our queues are still swept every interval.
REAPER_OTHERS_LOCK = "super_fetch:reaper:wurk_django"
# Private lists found ownerless, with when and at what length, where OBJECT IDLETIME is refused.
REAPER_QUIET = "super_fetch:reaper:quiet"
RECOVERED_PREFIX = "super_fetch:recovered:"
# STRING: the dead-set score up to which the result records of buried jobs were checked
# (results/buried.py); wurk_django only.
BURIED_SWEPT = "wurk_django:buried:swept"
PRIVATE_ALL = f"{QUEUE_PREFIX}*|*"  # SCAN pattern: every process's private lists


def private_queue(name: str, host: str, pid: int, nonce: str, index: int = 0) -> str:
    """The private LIST ``queue:<q>|<host>|<pid>|<nonce>|<index>`` holding what one
    process fetched (``index``: which of its fetching threads, 0 first)."""
    return f"{QUEUE_PREFIX}{name}|{host}|{pid}|{nonce}|{index}"


def private_pattern(name: str) -> str:
    """SCAN pattern for every private list of queue ``name``."""
    return f"{QUEUE_PREFIX}{glob_escape(name)}|*"


def glob_escape(text: str) -> str:
    """``text`` matched literally in a ``SCAN MATCH`` pattern: a queue name may hold ``*``, ``?``, ``[``."""
    return "".join("\\" + ch if ch in "\\*?[]" else ch for ch in text)


#: The slot index of a dead process's held list: a list no thread fetches into, where the
#: reaper keeps the jobs suspected in more than one crash until their turn to go back.
HELD_SLOT = 1_000_000


def started(host: str, pid: int, nonce: str, slot: int) -> str:
    """STRING naming which job fetch slot ``slot`` of a process is running: ``*`` for the
    oldest in its private lists, or ``-<n>|<queue>`` for the job ``LINDEX -<n>`` names in
    its list of ``queue`` (``-1`` the oldest; an earlier version wrote ``<index>|<queue>``,
    counted from the head), or ``?`` for "one of a batch of short jobs, not said which"
    (see :data:`EXACT_MARKS`). Not a ``queue:`` key, so no Sidekiq Pro reaper
    mistakes it for a private list."""
    return f"super_fetch:started:{host}|{pid}|{nonce}|{slot}"


#: STRING with a TTL: while it lives, every wurk_django worker names each job it starts
#: (no batch of short jobs goes unmarked). The reaper sets it whenever a process died
#: running jobs, so that a poison pill among short jobs is named at each of its next
#: deaths (a list that said only "one of a batch of short jobs was running", ``?``,
#: counts none of them). wurk_django only.
EXACT_MARKS = "super_fetch:exact_marks"


def paced(queue: str) -> str:
    """STRING: the jid of the suspected job of ``queue`` given back last, alone; the next
    one waits until it finished or crashed again (at most ``RELEASE_WAIT`` seconds, the
    key's TTL). wurk_django only."""
    return f"super_fetch:reaper:paced:{queue}"


#: ZSET: the held lists (:data:`HELD_SLOT`) that hold jobs, scored by when the death
#: that held their first job was found; read every few seconds while it is not empty,
#: by the process that gives held jobs back and by the admin's Held page. wurk_django only.
HELD_INDEX = "super_fetch:held"
#: STRING: a short lock, so one process at a time gives held jobs back. wurk_django only.
HELD_LOCK = "super_fetch:held:lock"


def crashes(jid: str) -> str:
    """LIST of ``<host>:<pid>:<nonce>|<epoch seconds>``, one per crash a job was running in
    (the newest last, 72 h TTL, the last 10 kept): why a held job is held. wurk_django only."""
    return f"super_fetch:crashes:{jid}"


def recovered(jid: str) -> str:
    """Counter of how many times a job was recovered from a dead process (poison pills)."""
    return f"{RECOVERED_PREFIX}{jid}"


# -- django.tasks results ------------------------------------------------------------


def task_status(jid: str) -> str:
    """HASH with a job's result record (wurk_django/results/: state, errors, return value...)."""
    return f"status:{jid}"
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


#: A STRING with a time to live, set while some fetcher waits on the wake-up lists (the
#: polling fallback): pushes write wake-up tokens only while it exists (wake_demand.py).
WAKE_WANTED = "wake-wanted"


def wake(name: str) -> str:
    """``wake:<queue>``: a LIST of tokens pushed with the pushes to ``queue:<queue>`` while
    :data:`WAKE_WANTED` exists; fetchers serving several queues in the polling fallback
    block on these lists when all their queues are empty."""
    return f"wake:{name}"


# -- queue limits (issue 47 item 4): not Sidekiq keys; Ruby processes never read them ---
QUEUE_LIMIT_PREFIX = "wurk_django:queue-limit:"


def queue_limit(name: str) -> str:
    """HASH of the slots taken in capped queue ``name``: the private list a running job was
    fetched into (which names its process) -> how many of its jobs run (normally 1)."""
    return f"{QUEUE_LIMIT_PREFIX}{name}"


# -- unique jobs: one lock per distinct job (ENT-203) ------------------------------------
UNIQUE_PREFIX = "unique:"


def unique_lock(digest: str) -> str:
    """``unique:<sha256 hex of the job's canonical context>``: a STRING holding the owner's jid."""
    return f"{UNIQUE_PREFIX}{digest}"
# -- push policies: debounce and throttle (issue 47 item 3; wurk's own, no Sidekiq key) ----
DEBOUNCE_PREFIX = "debounce:"
THROTTLE_PREFIX = "throttle:"
#: ZSET of debounce state keys (``debounce:<digest>``), score = when its pending job fires:
#: the admin's list of pending debounced jobs. Written by each debounced push (in its one
#: script); entries due over an hour ago are pruned by that script and by the admin.
DEBOUNCES = "debounces"
#: HASH: per throttled class and key (a JSON field), how many pushes were dropped. Written
#: only when a push is dropped (in the throttle script); expires a day after the last drop.
THROTTLE_DROPS = "throttle-drops"


def debounce_state(digest: str) -> str:
    """``debounce:<digest>``: a HASH (``member``: the pending job, ``first``: the burst's first push)."""
    return f"{DEBOUNCE_PREFIX}{digest}"


def throttle_slot(digest: str, slot: int) -> str:
    """``throttle:<digest>:<slot>``: a STRING holding the jid admitted in that slot."""
    return f"{THROTTLE_PREFIX}{digest}:{slot}"


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


# -- rate limiters: every use of a limiter refreshes its keys' TTL (ENT-110) -------------
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
# -- historical metrics: the leader's snapshot stream and its rollups (ENT-501..506) -----
HISTORY_STREAM = "history:metrics"  # STREAM of cluster snapshots
HISTORY_LOCK = "history-rollup-lock"  # who rolls up when no leader election runs


def throughput_rollup(bucket: str, start: int) -> str:
    """``jr|<1m|5m|1h>|<epoch of the bucket start>``: HASH p, f, ms summed over classes."""
    return f"jr|{bucket}|{start}"


def queue_rollup(bucket: str, start: int) -> str:
    """``qm|<1m|5m|1h>|<epoch of the bucket start>``: HASH ``<queue>|sz`` and ``<queue>|lt``."""
    return f"qm|{bucket}|{start}"
# -- leader election: one leader at a time, fenced by a token per term (ENT-301..309) ----
# LEADER ("dear-leader") above holds the leader's identity.
LEADER_TOKEN = "leader-token"  # INCR'd at each promotion: the fencing token of a term
LEADER_INFO = "leader-info"  # HASH identity, since, token of the current term, with the lock's TTL (wurk_django only)


# -- periodic jobs: the set of loops, each loop's hash and its fire history (ENT-401..415) ---
PERIODIC = "periodic"  # SET of loop ids (lids)


def loop(lid: str) -> str:
    """HASH schedule, klass, options, tz, paused, lf (last fire), nf (next fire)."""
    return f"loops:{lid}"


def loop_history(lid: str) -> str:
    """LIST of JSON [fired_at, jid], newest first, at most 25."""
    return f"loop-history:{lid}"


# -- dashboard bulk actions run as a job: not Sidekiq keys; Ruby processes never read them --
BULK_PREFIX = "wurk-bulk:"


def bulk(token: str) -> str:
    """HASH of one bulk action's progress: set, action, state, total, taken, done, kept..."""
    return f"{BULK_PREFIX}{token}"


def bulk_in_hand(token: str) -> str:
    """ZSET of the entries a bulk action took from its set and has not settled yet."""
    return f"{BULK_PREFIX}{token}:hand"


def bulk_kept(token: str) -> str:
    """ZSET of the entries a bulk action could not move; they go back to the set at the end."""
    return f"{BULK_PREFIX}{token}:kept"


# -- the HTTP API (issue 47 item 1): not Sidekiq keys; no Ruby process reads them --------
HTTP_API_PREFIX = "wurk_django:http_api:"


def http_api_idempotency(token: str, digest: str) -> str:
    """STRING (JSON): the first answer to one token's ``Idempotency-Key`` (``digest`` is
    its SHA-256), or a marker while that answer is being made; expires."""
    return f"{HTTP_API_PREFIX}idempotency:{token}:{digest}"
