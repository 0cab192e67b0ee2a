"""A worker's heartbeat and stat counters on a Redis Cluster (issue 46 stage 3).

The one-server heartbeat is one ``MULTI`` over ``processes``, ``<identity>``,
``<identity>:work`` and the stat keys: four slots on a cluster. Here:

* the process's own keys carry its tag ``{p:<identity>}`` (its hash, its work hash,
  its signals list): one slot, so they are written together, and the hash expires
  with :data:`TTL` as on one server (the reaper reads a process as gone once it has);
* the process set ``{wurk}:processes`` gets an ``SADD`` (one low-rate fleet-wide key);
* the counters go to ``{stats}:stat:processed``/``failed`` and their day keys, added
  once a beat, never once a job.

All in one redis-py cluster pipeline: one round trip per primary concerned.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

from ..redis.cluster_layout import CLUSTER

TTL = 60
DAY_STATS_TTL = 5 * 365 * 24 * 3600


def commands(identity: str, fields: dict[str, Any], work: dict[str, Any], counts: dict[str, int],
             *, day: str | None = None) -> list[tuple[Any, ...]]:
    """The commands of one beat of process ``identity``: its hash ``fields`` (``beat``
    is set to now), its busy threads ``work``, and the ``counts`` to add to the stat
    counters (kinds with a count of 0 are not sent)."""
    key = CLUSTER.process(identity)
    work_key = CLUSTER.work(identity)
    mapping = {**fields, "beat": repr(time.time())}
    flat = [part for item in mapping.items() for part in item]
    out: list[tuple[Any, ...]] = [("HSET", key, *flat), ("EXPIRE", key, TTL), ("UNLINK", work_key)]
    if work:
        out += [("HSET", work_key, *[part for item in work.items() for part in item]),
                ("EXPIRE", work_key, TTL)]
    out.append(("SADD", CLUSTER.processes, identity))
    day = day or dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    for kind, count in counts.items():
        if count:
            out += [("INCRBY", CLUSTER.stat(kind), count), ("INCRBY", CLUSTER.stat_on(kind, day), count),
                    ("EXPIRE", CLUSTER.stat_on(kind, day), DAY_STATS_TTL)]
    return out


def beat(client: Any, identity: str, fields: dict[str, Any], work: dict[str, Any],
         counts: dict[str, int]) -> list[str]:
    """Send one beat (:func:`commands`) on the ``RedisCluster`` ``client``; raises the first
    error reply. Returns the dashboard's signals popped from the process's signals list
    (``TSTP``, ``TERM``, ``TTIN``: the Busy page's quiet and stop, issue 46 item 3)."""
    pipe = client.pipeline(transaction=False)
    for command in commands(identity, fields, work, counts):
        pipe.execute_command(*command)
    pipe.execute_command("RPOP", CLUSTER.signals(identity), 10)
    replies = pipe.execute(raise_on_error=False)
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply
    return [raw.decode() if isinstance(raw, bytes) else str(raw) for raw in replies[-1] or []]


def deregister(client: Any, identity: str) -> None:
    """A clean stop: out of the process set, its keys gone."""
    client.srem(CLUSTER.processes, identity)
    client.unlink(CLUSTER.process(identity), CLUSTER.work(identity))
