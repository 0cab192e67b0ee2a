"""Slots of capped queues: taken with the job by the fetch, freed by the settle.

A capped queue ``q`` has a HASH ``wurk_django:queue-limit:q`` (:func:`keys.queue_limit`):
field = the private list a running job of ``q`` was fetched into
(``queue:q|<host>|<pid>|<nonce>|<slot>``, which names the process that runs it), value
= how many of its jobs run (1, since a capped queue is fetched one job at a time). The
sum of the values is the queue's slots in use. Keyed by the private list because that
is what the reaper already judges alive or dead (:mod:`wurk_django.server.reaper`):
the slots of a process that died go by the same rule as its jobs come back.

* the fetch (``lua/fetch.lua``) looks at each queue in the fetcher's order, skips a
  full one without touching it, and moves a job and counts its slot in one step;
* :func:`release` counts it down once the run is settled, or once a job taken with a
  slot goes back unrun (one round trip, from whatever thread ends it); a release that
  Redis refuses is kept and sent again by the next release or the keeper's tick;
* :class:`Keeper`, a worker component, frees every ``reaper_interval`` the slots of
  processes the reaper's rules find dead (:func:`free_dead`).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any

import redis as redis_lib

from .. import keys
from ..client.writer import Writer
from ..redis.cluster_layout import layout_of
from ..redis.connection import get_redis
from ..redis.scripts import lua

logger = logging.getLogger("wurk_django.worker")

FETCH = lua("queue_limits/lua/fetch")
RELEASE = lua("queue_limits/lua/release")

# Releases Redis refused: (config, queue, field, count), sent again before the next release.
_unsent: deque[tuple[Any, str, str, int]] = deque()
_unsent_lock = threading.Lock()


class QueueCaps:
    """The limits one fetcher applies: those of ``limits`` naming a queue in ``names``."""

    __slots__ = ("limits", "_keys")

    def __init__(self, limits: dict[str, int], names: list[str]) -> None:
        self.limits = {name: int(limits[name]) for name in names if name in limits}
        self._keys = {name: keys.queue_limit(name) for name in self.limits}

    def __bool__(self) -> bool:
        return bool(self.limits)

    def capped(self, name: str) -> bool:
        return name in self.limits

    def any(self, names: list[str]) -> bool:
        """True when one of ``names`` is capped."""
        limits = self.limits
        return any(name in limits for name in names)

    def key(self, name: str) -> str:
        return self._keys[name]

    def fetch_command(self, pairs: list[tuple[str, str]], names: list[str], arm: bool,
                      others: tuple[str, ...] = (), most: int = 1) -> tuple[Any, ...]:
        """The ``fetch.lua`` command over ``names`` (their (public, private) in ``pairs``),
        reading ``others`` too when it arms a tracking connection; up to ``most`` jobs
        when the queue it finds a job in is uncapped."""
        script_keys: list[str] = []
        args: list[Any] = [len(names), "1" if arm else "0", most]
        for name, (public, private) in zip(names, pairs, strict=True):
            script_keys += (public, private, self._keys.get(name, public))
            args.append(self.limits.get(name, 0))
        return FETCH.command(keys=[*script_keys, *others], args=args)


def release_command(queue: str, field: str, count: int = 1) -> tuple[Any, ...]:
    return RELEASE.command(keys=[keys.queue_limit(queue), keys.wake(queue), keys.WAKE_WANTED],
                           args=[field, count, keys.WAKE_TOKENS_MAX, keys.WAKE_TTL])


def release(unit: Any) -> None:
    """Free the slot ``unit`` took, if it took one (once: the unit forgets it). Called by
    the settle of its run, and by the paths that give a job back unrun. Never raises:
    a release Redis refuses is kept and sent again later."""
    cap = getattr(unit, "cap", None)
    if cap is None:
        return
    unit.cap = None
    free = getattr(unit, "free_cap", None)
    if free is not None:
        free(cap)  # a unit fetched on a Redis Cluster: its queue's slot hash (cluster.py)
        return
    send(unit.slot.config, [(unit.queue, cap, 1)])


def send(config: Any, releases: list[tuple[str, str, int]]) -> None:
    """Send ``releases`` ((queue, field, count) each), with any kept from before, in one
    round trip; keep them all when Redis refuses."""
    pending = [(config, queue, field, count) for queue, field, count in releases]
    if _unsent:
        with _unsent_lock:
            while _unsent:
                pending.insert(0, _unsent.popleft())
    if not pending:
        return
    try:
        Writer(pending[0][0]).send([release_command(queue, field, count) for _, queue, field, count in pending])
    except redis_lib.RedisError as exc:
        logger.warning("could not free %d slot(s) of capped queues (%s); will try again", len(pending), exc)
        with _unsent_lock:
            _unsent.extendleft(reversed(pending))


def in_use(client: Any, names: list[str]) -> dict[str, int]:
    """Slots in use per queue of ``names``, in one round trip."""
    if not names:
        return {}
    layout = layout_of(client)  # on a Redis Cluster, each queue's hash is in its own slot
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.hvals(layout.queue_limit(name))
    return {name: sum(int(v) for v in values) for name, values in zip(names, pipe.execute(), strict=True)}


def free_dead(reaper: Any, client: Any, names: list[str]) -> int:
    """Free the slots of ``names`` held by processes the reaper's rules find dead (its
    heartbeat lapsed, its pid gone); returns how many fields went. A dead process cannot
    take or free a slot, so deleting its fields races with nobody."""
    from ..server.reaper import parse_private

    if not names:
        return 0
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.hkeys(keys.queue_limit(name))
    held = dict(zip(names, pipe.execute(), strict=True))
    if not any(held.values()):
        return 0
    live = reaper.live_owners(client)
    freed = 0
    for name, fields in held.items():
        dead = []
        for raw in fields:
            field = raw.decode() if isinstance(raw, bytes) else raw
            parsed = parse_private(field)
            if parsed is None or not reaper.alive(client, field, parsed[1], parsed[2], parsed[3], live):
                dead.append(raw)
        if dead:
            freed += int(client.hdel(keys.queue_limit(name), *dead) or 0)
            logger.info("freed %d slot(s) of capped queue %s held by processes that are gone", len(dead), name)
    return freed


class Keeper:
    """The worker component: frees the slots of dead processes, and sends again the
    releases Redis refused, every ``reaper_interval`` (and soon after boot)."""

    def __init__(self, launcher: Any, names: list[str]) -> None:
        from ..server.reaper import Reaper
        from ..server.timer import TimerLoop

        config = launcher.config
        self.config = config
        self.names = names
        # The launcher's reaper when it has one (reliable fetch): the same rules, the same
        # memory of lists whose idle time the server will not tell.
        self.reaper = launcher.reaper or Reaper(names, config.reaper_interval, config.reaper_orphan_grace,
                                                config=config)
        interval = float(config.reaper_interval)
        self.loop = TimerLoop("wurk-queue-limits", self.tick, lambda: interval, first_wait=min(interval, 1.0))

    def tick(self) -> None:
        send(self.config, [])
        free_dead(self.reaper, get_redis(config=self.config), self.names)

    def start(self) -> None:
        self.loop.start()

    def stop(self) -> None:
        self.loop.stop()
