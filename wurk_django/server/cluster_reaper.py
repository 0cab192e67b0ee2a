"""Recovery of dead processes' jobs on a Redis Cluster (issue 46 stage 3).

A job a worker fetched on a cluster sits in a private list in its queue's slot
(``{q:<name>}:private|<host>|<pid>|<nonce>|<slot>``, :mod:`.fetch.cluster`) until it
settles. When the process dies without settling it (kill -9, a lost machine), the
list stays; :func:`recover` finds such lists on every primary (``SCAN`` with the
private-list pattern, node by node) and moves their jobs back onto their queues with
``lua/cluster_reclaim.lua``, both lists in one slot, so one atomic step per list.

A list's owner is alive while its process hash ``{p:<identity>}`` exists (the
heartbeat keeps it with a TTL, :mod:`.cluster_heartbeat`) and, when it ran in this
host's pid space, while its pid runs the process that wrote it (:mod:`.pidspace`).
A fork sibling (a child of the same swarm: this host, this nonce) is alive while its
pid runs, whatever its hash says. The process running the sweep never reclaims its
own lists.

Not here yet: the one-server reaper's poison-pill accounting (recovery counters,
crash records, held jobs) and its lock; a sweep by two processes at once is safe
(the script moves what is there; the second finds the list empty).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import orjson
import redis as redis_lib

from ..redis.cluster_layout import CLUSTER
from ..redis.scripts import lua
from . import pidspace
from .state import NONCE, hostname

logger = logging.getLogger("wurk_django.worker")

RECLAIM = lua("cluster_reclaim")

#: ``SCAN`` pattern of every private list: ``{q:`` ... ``}:private|`` ... (the name is escaped, no ``}``).
PATTERN = "{q:*}:private|*"


def unescape(name: str) -> str:
    """The queue name inside a ``{q:...}`` tag (the reverse of :func:`cluster_layout.tag`)."""
    return name.replace("%7D", "}").replace("%7B", "{").replace("%25", "%")


def parse(key: str) -> tuple[str, str] | None:
    """``(queue, owner identity)`` of a private list's name, or ``None`` for another key.
    The identity is ``<host>:<pid>:<nonce>``, as the heartbeat names the process."""
    if not key.startswith("{q:"):
        return None
    end = key.find("}:private|")
    if end < 0:
        return None
    parts = key[end + len("}:private|"):].split("|")
    if len(parts) != 4:
        return None
    host, pid, nonce, _slot = parts
    return unescape(key[3:end]), f"{host}:{pid}:{nonce}"


def private_lists(client: Any) -> Iterator[str]:
    """Every private list on the cluster, primary by primary. A primary that cannot be
    scanned now (killed, being failed over: issue 46 item 4) is skipped with a warning,
    so the others are still swept; the next sweep asks the cluster's nodes again."""
    for node in client.get_primaries():
        try:
            for key in client.get_redis_connection(node).scan_iter(match=PATTERN, count=500):
                yield key.decode() if isinstance(key, bytes) else key
        except (redis_lib.ConnectionError, redis_lib.TimeoutError) as exc:
            logger.warning("recovery skipped primary %s this time: %s", node.name, exc)


def sibling_pid(owner: str) -> int | None:
    """The pid of ``owner`` when it is a fork sibling of this process (this host, this
    process's nonce: forked by the same swarm supervisor, or its supervisor), else None."""
    host, _, rest = owner.partition(":")
    pid, _, nonce = rest.partition(":")
    if host != hostname() or nonce != NONCE or not pid.isdigit():
        return None
    return int(pid)


def alive(client: Any, owner: str) -> bool:
    """Whether process ``owner`` is alive.

    A fork sibling (this host and nonce, a swarm's child: issue 46 item 3) is alive while
    its pid runs, as the one-server reaper's first rule says: a child killed before its
    first beat is judged at once, and a sibling booting (listed a moment after it first
    fetched) is never judged dead. Any other process: its hash has not expired, and when
    it ran in this host's pid space (its ``info`` says, as on one server:
    :mod:`.pidspace`), its pid still runs the process that wrote it, so a worker restarted
    after a kill -9 takes its predecessor's jobs back at once instead of a heartbeat TTL
    later."""
    sibling = sibling_pid(owner)
    if sibling is not None:
        return not pidspace.gone(sibling, None)
    info = client.hget(CLUSTER.process(owner), "info")
    if info is None:
        return False
    try:
        record = orjson.loads(info)
        same_space = record.get("pid_scope") is not None and record.get("pid_scope") == pidspace.scope()
        if same_space and pidspace.gone(int(record["pid"]), record.get("pid_started")):
            return False
    except (ValueError, TypeError, KeyError, AttributeError):
        pass  # an info it cannot read: alive until its hash expires
    return True


def recover(client: Any, own_identity: str | None = None) -> int:
    """Move back onto their queues the jobs of every private list whose owner is gone
    (its ``{p:<identity>}`` hash expired), except ``own_identity``'s; how many jobs moved."""
    alive_now: dict[str, bool] = {}
    moved = 0
    for key in private_lists(client):
        parsed = parse(key)
        if parsed is None:
            continue
        queue, owner = parsed
        if owner == own_identity:
            continue
        if owner not in alive_now:
            alive_now[owner] = alive(client, owner)
        if alive_now[owner]:
            continue
        try:
            count = int(RECLAIM(client, keys=[key, CLUSTER.queue(queue)]))
        except redis_lib.ResponseError as exc:
            # TRYAGAIN: the slot is moving and its two lists are on different nodes for a
            # moment (issue 46 item 4); the next sweep moves them. Not a reason to skip the rest.
            logger.warning("could not recover %s now (%s); the next sweep will", key, exc)
            continue
        if count:
            logger.warning("recovered %d job(s) of dead process %s onto queue %s", count, owner, queue)
        moved += count
    return moved


def prune_processes(client: Any) -> int:
    """Drop from ``{wurk}:processes`` every process whose hash has expired (killed without
    deregistering): on one server the scheduler does this; how many were dropped."""
    members = [m.decode() if isinstance(m, bytes) else m for m in client.smembers(CLUSTER.processes)]
    gone = [identity for identity in members if not client.exists(CLUSTER.process(identity))]
    if gone:
        client.srem(CLUSTER.processes, *gone)
    return len(gone)

