"""Where wurk's keys go on a Redis Cluster (issue 46): designed once, here.

A cluster runs a command, a ``MULTI`` or a Lua script only when every key it
touches hashes to one slot, and spreads slots over its primaries. So the layout
has two jobs: every step that must be atomic keeps its keys in one slot, and
what carries the load (queues) lands in many slots. A key's slot is decided by
its *hash tag*, the text between the first ``{`` and the next ``}``.

* **One tag per queue**, ``{q:<name>}``: the queue's list, its wake-up list, the
  private lists reliable fetch moves jobs into (the held ones too) with their
  markers, recovery counters, crash records and held index, its slot hash when
  ``QUEUE_LIMITS`` caps it, that queue's *own* ``schedule``, ``retry`` and ``dead``
  sets and paused flag, and the push policies' keys of its jobs (a debounce's state
  and index, a throttle's slots and drop counters) and what a background bulk action
  holds of its sets. Then every step of
  a job's life is one slot: push (``LPUSH``), fetch (``LMOVE`` queue -> private
  list), ack (``LREM`` on the private list), a retry booked (``ZADD`` retry),
  promotion (``ZRANGE``/``ZREM`` + ``LPUSH``: one script), a death (``ZADD``
  dead), recovery of a dead process's jobs (private list -> queue). Different
  queues hash to different slots, so a fleet with many queues spreads over every
  primary; one very busy queue stays on one primary (as a BullMQ queue does):
  split it into several queues to spread it.
* **Per-queue schedule/retry/dead** instead of Sidekiq's three global sorted sets:
  one global set would be the hottest key of the cluster (every ``perform_in``,
  every failure) and promotion would cross slots. The cost is that the scheduler
  polls each known queue's sets instead of two, and the admin merges per-queue
  sets into its Scheduled/Retries/Dead pages (stage 2).
* **Fleet-wide state is low-rate, and has tags of its own**, each in one slot:
  ``{wurk}`` (the queue set, the process set, the reaper's locks), ``{stats}``
  (the counters: each process adds its counts once a heartbeat, not per job),
  ``{leader}`` (the lock, its fencing token and info: one campaign script). The
  queue set is *not* written by every push (it would make ``{wurk}`` as hot as all
  queues together): a process adds a queue's name the first time it pushes to it
  and again at most once a minute (:data:`QUEUE_SET_REFRESH`).
* **One tag per process** ``{p:<identity>}`` (its hash, its work hash, its signals
  list: one heartbeat ``MULTI``), **per batch** ``{b:<bid>}``, **per limiter**
  ``{l:<name>}``, **per periodic loop** ``{loop:<lid>}``, **per workflow**
  ``{wf:<id>}``: their own steps are one slot, and there are many of each.
* Keys only ever used alone (a result record ``status:<jid>``, a metrics minute,
  an iteration cursor) keep their Sidekiq names: one key, one slot, spread by name.

Names inside a tag are escaped (:func:`tag`), so a queue called ``a}b`` cannot
share a slot by accident with a queue called ``a``.

This module only names keys (and tells which layout a client's Redis has:
:func:`layout_of`, :func:`known_queues`).
:class:`SidekiqLayout` is the same interface over :mod:`wurk_django.keys`, byte for
byte the layout of one server, so code written against a layout takes the queue
everywhere (``layout.retry(queue)``) and runs on both.
"""

from __future__ import annotations

from typing import Any

from redis.cluster import ClusterPipeline, RedisCluster

from .. import keys

#: Seconds a process trusts that a queue it pushed to is in the queue set (cluster only).
QUEUE_SET_REFRESH = 60.0

#: Tags of the fleet-wide keys.
FLEET = "{wurk}"
STATS = "{stats}"
LEADER = "{leader}"


def tag(kind: str, name: str) -> str:
    """``{<kind>:<name>}`` with ``%``, ``{`` and ``}`` of ``name`` percent-escaped: the
    whole name is the hash tag, and two names never share a tag."""
    escaped = name.replace("%", "%25").replace("{", "%7B").replace("}", "%7D")
    return f"{{{kind}:{escaped}}}"


def queue_tag(name: str) -> str:
    """The hash tag of every key of queue ``name``."""
    return tag("q", name)


class SidekiqLayout:
    """The one-server layout, Sidekiq's (:mod:`wurk_django.keys`), behind the same
    methods as :class:`ClusterLayout`; the queue arguments of the global sets are
    ignored."""

    cluster = False
    queues = keys.QUEUES
    processes = keys.PROCESSES
    process_cleanup = keys.PROCESS_CLEANUP
    reaper_lock = keys.REAPER_LOCK
    leader = keys.LEADER
    leader_token = keys.LEADER_TOKEN
    leader_info = keys.LEADER_INFO
    batches = keys.BATCHES
    dead_batches = keys.DEAD_BATCHES
    revoked = "revoked"  # wurk_django.revocation.KEY
    periodic = keys.PERIODIC
    limiter_list = keys.LIMITER_LIST
    workflows = "workflows"  # wurk_django.workflow.keys.WORKFLOWS
    profiles = keys.PROFILES

    def queue(self, name: str) -> str:
        return keys.queue(name)

    def wake(self, name: str) -> str:
        return keys.wake(name)

    def private_queue(self, name: str, host: str, pid: int, nonce: str, index: int = 0) -> str:
        return keys.private_queue(name, host, pid, nonce, index)

    def started(self, queue: str, host: str, pid: int, nonce: str, slot: int) -> str:
        """The marker naming the job a fetch slot runs (one server: one per slot, whatever the queue)."""
        return keys.started(host, pid, nonce, slot)

    def recovered(self, queue: str, jid: str) -> str:
        return keys.recovered(jid)

    def crashes(self, queue: str, jid: str) -> str:
        return keys.crashes(jid)

    def paced(self, queue: str) -> str:
        return keys.paced(queue)

    def held_index(self, queue: str) -> str:
        return keys.HELD_INDEX

    def queue_limit(self, queue: str) -> str:
        """The slots taken in capped queue ``queue`` (``QUEUE_LIMITS``)."""
        return keys.queue_limit(queue)

    def schedule(self, queue: str) -> str:
        return keys.SCHEDULE

    def retry(self, queue: str) -> str:
        return keys.RETRY

    def dead(self, queue: str) -> str:
        return keys.DEAD

    def paused(self, queue: str) -> str:
        """The paused set (one server: the set of names; a queue is paused when in it)."""
        return keys.PAUSED

    def stat(self, kind: str) -> str:
        return keys.stat(kind)

    def stat_on(self, kind: str, day: str) -> str:
        return keys.stat_on(kind, day)

    def process(self, identity: str) -> str:
        return keys.process(identity)

    def work(self, identity: str) -> str:
        return keys.work(identity)

    def signals(self, identity: str) -> str:
        return keys.signals_list(identity)

    def unique_lock(self, queue: str, digest: str) -> str:
        return keys.unique_lock(digest)

    def batch(self, bid: str, suffix: str | None = None) -> str:
        return keys.batch(bid, suffix)

    def batch_keys(self, bid: str) -> list[str]:
        """Every key a batch may own: the hash first, then each suffix."""
        return [self.batch(bid), *(self.batch(bid, s) for s in keys.BATCH_SUFFIXES)]

    def batch_tag(self, tag: str) -> str:
        return keys.batch_tag(tag)

    def batch_fired(self, queue: str, bid: str, event: str) -> str:
        """The marker claiming a batch event: one server, the batch's own ``b-<bid>-<event>``."""
        return keys.batch(bid, event)

    def limiter_meta(self, name: str) -> str:
        return keys.limiter_meta(name)

    def limiter_slots(self, name: str) -> str:
        return keys.limiter_slots(name)

    def limiter_stats(self, name: str) -> str:
        return keys.limiter_stats(name)

    def limiter_bucket(self, name: str, epoch: int) -> str:
        return keys.limiter_bucket(name, epoch)

    def limiter_window(self, name: str) -> str:
        return keys.limiter_window(name)

    def limiter_leaky(self, name: str) -> str:
        return keys.limiter_leaky(name)

    def limiter_points(self, name: str) -> str:
        return keys.limiter_points(name)

    def loop(self, lid: str) -> str:
        return keys.loop(lid)

    def loop_history(self, lid: str) -> str:
        return keys.loop_history(lid)

    def status(self, jid: str) -> str:
        return keys.task_status(jid)

    def workflow(self, wid: str, suffix: str | None = None) -> str:
        """A workflow's hash ``wf-<id>``, or its ``wf-<id>-<suffix>`` (wurk_django.workflow.keys)."""
        return f"wf-{wid}" if suffix is None else f"wf-{wid}-{suffix}"

    def debounce_state(self, queue: str, digest: str) -> str:
        return keys.debounce_state(digest)

    def debounces(self, queue: str) -> str:
        """The index of pending debounced jobs (one server: one for the fleet)."""
        return keys.DEBOUNCES

    def throttle_slot(self, queue: str, digest: str, slot: int) -> str:
        return keys.throttle_slot(digest, slot)

    def throttle_drops(self, queue: str) -> str:
        """The throttle's drop counters (one server: one hash for the fleet)."""
        return keys.THROTTLE_DROPS

    def bulk_in_hand(self, token: str, queue: str) -> str:
        """A background bulk action's taken entries (one server: one set per action)."""
        return keys.bulk_in_hand(token)

    def bulk_kept(self, token: str, queue: str) -> str:
        return keys.bulk_kept(token)

    def bulk_taken(self, token: str, queue: str) -> str:
        """The hash whose ``taken`` counts what the action took (one server: its progress hash)."""
        return keys.bulk(token)


class ClusterLayout(SidekiqLayout):
    """The cluster layout (this module's docstring says why each key goes where)."""

    cluster = True
    queues = f"{FLEET}:queues"
    processes = f"{FLEET}:processes"
    process_cleanup = f"{FLEET}:process_cleanup"
    reaper_lock = f"{FLEET}:super_fetch:reaper"
    leader = f"{LEADER}:dear-leader"
    leader_token = f"{LEADER}:leader-token"
    leader_info = f"{LEADER}:leader-info"
    batches = f"{FLEET}:batches"
    dead_batches = f"{FLEET}:dead-batches"
    revoked = f"{FLEET}:revoked"
    periodic = f"{FLEET}:periodic"
    limiter_list = f"{FLEET}:lmtr-list"
    workflows = f"{FLEET}:workflows"
    #: The index of stored job profiles; each profile's hash ``<token>-<jid>`` keeps its name
    #: (a key used alone), so storing one is two steps there (the hash first).
    profiles = f"{FLEET}:profiles"

    def queue(self, name: str) -> str:
        return f"{queue_tag(name)}:queue"

    def wake(self, name: str) -> str:
        return f"{queue_tag(name)}:wake"

    def private_queue(self, name: str, host: str, pid: int, nonce: str, index: int = 0) -> str:
        return f"{queue_tag(name)}:private|{host}|{pid}|{nonce}|{index}"

    def started(self, queue: str, host: str, pid: int, nonce: str, slot: int) -> str:
        """In the slot of the queue the job came from: written in the fetch's own step."""
        return f"{queue_tag(queue)}:started|{host}|{pid}|{nonce}|{slot}"

    def recovered(self, queue: str, jid: str) -> str:
        """The recovery counter reclaim.lua bumps while it moves the job back: the queue's slot."""
        return f"{queue_tag(queue)}:recovered:{jid}"

    def crashes(self, queue: str, jid: str) -> str:
        return f"{queue_tag(queue)}:crashes:{jid}"

    def paced(self, queue: str) -> str:
        return f"{queue_tag(queue)}:paced"

    def held_index(self, queue: str) -> str:
        """Per queue: held_forget.lua drops a held list from its index in one step."""
        return f"{queue_tag(queue)}:held"

    def queue_limit(self, queue: str) -> str:
        """In the queue's slot: the fetch checks the cap, moves the job and takes its slot
        in one script (issue 46 item 3)."""
        return f"{queue_tag(queue)}:limit"

    def schedule(self, queue: str) -> str:
        return f"{queue_tag(queue)}:schedule"

    def retry(self, queue: str) -> str:
        return f"{queue_tag(queue)}:retry"

    def dead(self, queue: str) -> str:
        return f"{queue_tag(queue)}:dead"

    def paused(self, queue: str) -> str:
        """A flag (STRING ``1``) per queue: checked by the fetch in the queue's own slot."""
        return f"{queue_tag(queue)}:paused"

    def stat(self, kind: str) -> str:
        return f"{STATS}:stat:{kind}"

    def stat_on(self, kind: str, day: str) -> str:
        return f"{STATS}:stat:{kind}:{day}"

    def process(self, identity: str) -> str:
        return tag("p", identity)

    def work(self, identity: str) -> str:
        return f"{tag('p', identity)}:work"

    def signals(self, identity: str) -> str:
        return f"{tag('p', identity)}:signals"

    def unique_lock(self, queue: str, digest: str) -> str:
        """In the queue's slot: taking the lock and pushing the job are then one script."""
        return f"{queue_tag(queue)}:unique:{digest}"

    def batch(self, bid: str, suffix: str | None = None) -> str:
        return tag("b", bid) if suffix is None else f"{tag('b', bid)}:{suffix}"

    def batch_tag(self, tag_name: str) -> str:
        """A tag's set of bids: its own slot (a tag is shared by many batches)."""
        return f"{tag('bt', tag_name)}:bids"

    def batch_fired(self, queue: str, bid: str, event: str) -> str:
        """In the callback queue's slot: claiming the event and pushing its callbacks are
        then one script (issue 46 item 3), as ``fire.lua`` is on one server."""
        return f"{queue_tag(queue)}:batch-fired:{bid}:{event}"

    def limiter_meta(self, name: str) -> str:
        return f"{tag('l', name)}:meta"

    def limiter_slots(self, name: str) -> str:
        return f"{tag('l', name)}:cs"

    # Every key of one limiter in its slot: a call's script and the counters it bumps
    # beside it (concurrent's stats) are one slot, and limiters spread by name.
    def limiter_stats(self, name: str) -> str:
        return f"{tag('l', name)}:stats"

    def limiter_bucket(self, name: str, epoch: int) -> str:
        return f"{tag('l', name)}:b:{epoch}"

    def limiter_window(self, name: str) -> str:
        return f"{tag('l', name)}:w"

    def limiter_leaky(self, name: str) -> str:
        return f"{tag('l', name)}:l"

    def limiter_points(self, name: str) -> str:
        return f"{tag('l', name)}:p"

    # Push policies (debounce, throttle) in the slot of the job's queue: a debounced push
    # replaces the pending job in that queue's schedule set and books it in the queue's
    # index in one script; a throttle's slot key and its drop counters are one script too.
    # The admin reads each known queue's index and counters, as it merges the queue's sets.
    def debounce_state(self, queue: str, digest: str) -> str:
        return f"{queue_tag(queue)}:debounce:{digest}"

    def debounces(self, queue: str) -> str:
        return f"{queue_tag(queue)}:debounces"

    def throttle_slot(self, queue: str, digest: str, slot: int) -> str:
        return f"{queue_tag(queue)}:throttle:{digest}:{slot}"

    def throttle_drops(self, queue: str) -> str:
        return f"{queue_tag(queue)}:throttle-drops"

    # A background bulk action works through each queue's own set in turn: what it took,
    # kept aside and counted is in the queue's slot, so a chunk's take is one script.
    def bulk_in_hand(self, token: str, queue: str) -> str:
        return f"{queue_tag(queue)}:bulk:{token}:hand"

    def bulk_kept(self, token: str, queue: str) -> str:
        return f"{queue_tag(queue)}:bulk:{token}:kept"

    def bulk_taken(self, token: str, queue: str) -> str:
        return f"{queue_tag(queue)}:bulk:{token}"

    def loop(self, lid: str) -> str:
        return tag("loop", lid)

    def loop_history(self, lid: str) -> str:
        return f"{tag('loop', lid)}:history"

    def workflow(self, wid: str, suffix: str | None = None) -> str:
        """Every key of one workflow in its slot: its scripts (advance, fail, retry, cancel)
        are then one slot, and workflows spread by id."""
        return tag("wf", wid) if suffix is None else f"{tag('wf', wid)}:{suffix}"

    def workflow_pushed(self, queue: str, wid: str, step: str) -> str:
        """The marker claiming the push of a workflow's step (cluster only), in the slot of the
        step's queue: claiming it and pushing the job are one script (wurk_django/workflow/cluster.py)."""
        return f"{queue_tag(queue)}:wf-pushed:{wid}:{step}"


SIDEKIQ = SidekiqLayout()
CLUSTER = ClusterLayout()


def for_cluster(cluster: bool) -> SidekiqLayout:
    """The layout for a server that is (``True``) or is not a cluster node."""
    return CLUSTER if cluster else SIDEKIQ


def layout_of(client: Any) -> SidekiqLayout:
    """The layout of the server ``client`` talks to: a redis-py ``RedisCluster`` (or its
    pipeline) is a cluster's, anything else one server's. For features handed a client
    (a job's ``ctx.redis``, the cluster worker's): the client decides, not a setting."""
    return CLUSTER if isinstance(client, (RedisCluster, ClusterPipeline)) else SIDEKIQ


def known_queues(client: object) -> list[str]:
    """The names in the queue set of ``client``'s Redis (``{wurk}:queues`` on a cluster),
    sorted: the queues whose per-queue keys a fleet-wide view reads."""
    from ..text import to_text

    return sorted(to_text(name) for name in client.smembers(layout_of(client).queues))  # type: ignore[attr-defined]


def steps(layout: SidekiqLayout, queue: str, *, host: str = "h", pid: int = 1, nonce: str = "n",
          identity: str = "h:1:n", bid: str = "B", limiter: str = "L", lid: str = "P") -> dict[str, list[str]]:
    """Every multi-key step of the core and of the features whose keys are named here,
    with the keys it touches in one command, ``MULTI`` or script: on a cluster each
    must be one slot (tests/redis/test_cluster_layout.py checks it, on a real one too)."""
    private = layout.private_queue(queue, host, pid, nonce)
    held = layout.private_queue(queue, host, pid, nonce, keys.HELD_SLOT)
    found = {
        "push": [layout.queue(queue), layout.wake(queue)],
        "fetch (reliable)": [layout.queue(queue), private, layout.paused(queue),
                             layout.started(queue, host, pid, nonce, 0), layout.recovered(queue, "J")],
        "fetch of a capped queue, its slot taken": [layout.queue(queue), private, layout.queue_limit(queue)],
        "ack": [private],
        "requeue": [private, layout.queue(queue)],
        "recover a dead process's jobs (reclaim.lua)": [private, layout.queue(queue), layout.recovered(queue, "J"),
                                                        held],
        "held job given back": [layout.held_index(queue), held, layout.queue(queue), layout.crashes(queue, "J"),
                                layout.paced(queue)],
        "retry booked": [private, layout.retry(queue)],
        "death": [private, layout.retry(queue), layout.dead(queue)],
        "schedule promoted": [layout.schedule(queue), layout.queue(queue), layout.wake(queue), layout.dead(queue)],
        "retry promoted": [layout.retry(queue), layout.queue(queue), layout.wake(queue), layout.dead(queue)],
        "unique push": [layout.unique_lock(queue, "d1g3st"), layout.queue(queue), layout.wake(queue)],
        "heartbeat": [layout.process(identity), layout.work(identity), layout.signals(identity)],
        "stats flush": [layout.stat("processed"), layout.stat("failed"),
                        layout.stat_on("processed", "2026-01-01"), layout.stat_on("failed", "2026-01-01")],
        "leader campaign": [layout.leader, layout.leader_token, layout.leader_info],
        "batch": [layout.batch(bid), layout.batch(bid, "jids"), layout.batch(bid, "failed"),
                  layout.batch(bid, "complete"), layout.batch(bid, "success"), layout.batch(bid, "died"),
                  layout.batch(bid, "pkids")],
        "batch event claimed, its callbacks pushed": [layout.batch_fired(queue, bid, "success"), layout.queue(queue),
                                                       layout.wake(queue)],
        "debounced push": [layout.debounce_state(queue, "d1g3st"), layout.schedule(queue), layout.debounces(queue)],
        "throttled push": [layout.throttle_slot(queue, "d1g3st", 7), layout.throttle_drops(queue)],
        "bulk action's chunk taken (bulk_take.lua)": [layout.dead(queue), layout.bulk_in_hand("T", queue),
                                                       layout.bulk_taken("T", queue)],
        "bulk action's entry kept aside": [layout.bulk_kept("T", queue), layout.bulk_in_hand("T", queue)],
        "limiter": [layout.limiter_meta(limiter), layout.limiter_slots(limiter), layout.limiter_stats(limiter)],
        "periodic fire": [layout.loop(lid), layout.loop_history(lid)],
        "workflow (advance, fail, retry, cancel, store a result)": [
            layout.workflow(bid), *(layout.workflow(bid, s) for s in ("state", "left", "results", "errors", "wire",
                                                                       "steps"))],
        "process set, reaper": [layout.queues, layout.processes, layout.process_cleanup, layout.reaper_lock],
    }
    if layout.cluster:
        found["workflow step claimed and pushed"] = [CLUSTER.workflow_pushed(queue, "W", "s"), layout.queue(queue),
                                                     layout.wake(queue)]
    return found
