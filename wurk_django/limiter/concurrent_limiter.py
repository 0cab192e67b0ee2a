"""Concurrent limiter: at most ``limit`` holders at once, across every process.

Each holder owns a slot in a sorted set scored by its expiry (now +
``lock_timeout``); a holder that dies without releasing is evicted by the next
acquire once that time has passed, so a crashed worker frees its slot.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from ..redis.cluster_layout import SidekiqLayout, layout_of
from ..redis.scripts import lua
from . import options as opts
from .base import Held, Limiter, OverLimit, layout, redis_client, run, send

#: Poll period while waiting for a slot, and the line between an "immediate" and a "waited" acquire.
WAIT_SLEEP = 0.05
#: The counters kept in ``lmtr-stats:<name>``, all integers.
COUNTERS = ("held", "held_time", "immediate", "waited", "wait_time", "overages", "reclaimed")


class Concurrent(Limiter):
    type = "concurrent"

    def __init__(self, name: str, limit: int, *, wait_timeout: float = opts.DEFAULT_WAIT_TIMEOUT,
                 lock_timeout: int = opts.DEFAULT_LOCK_TIMEOUT, policy: str = "raise", backoff: Any = None,
                 ttl: int = opts.DEFAULT_TTL, reschedule: int | None = None, register: bool = True) -> None:
        options: dict[str, Any] = {
            "limit": opts.positive_int("limit", limit),
            "wait_timeout": opts.non_negative_number("wait_timeout", wait_timeout),
            "lock_timeout": opts.positive_int("lock_timeout", lock_timeout),
            "policy": opts.policy(policy),
            "backoff": opts.backoff(backoff),
            "ttl": opts.ttl(ttl),
        }
        if opts.reschedule(reschedule) is not None:
            options["reschedule"] = reschedule
        super().__init__(name, options, register=register)
        self.limit = limit

    def state_keys(self, where: SidekiqLayout | None = None) -> list[str]:
        where = where or layout()
        return [where.limiter_slots(self.name), where.limiter_stats(self.name)]

    def _take(self) -> Held:
        slot = secrets.token_hex(8)
        started = time.monotonic()
        deadline = started + self.options["wait_timeout"]
        args = [self.limit, self.options["lock_timeout"], slot, self.ttl]
        client = redis_client()
        state = self.state_keys(layout_of(client))
        while True:
            ok = run("concurrent_acquire", state, args + self._now_args(), client)[0]
            if int(ok) == 1:
                return Held(self, True, slot=slot, started=started, acquired_at=time.monotonic())
            if self.policy != "raise":
                return Held(self, False)
            left = deadline - time.monotonic()
            if left <= 0:
                raise OverLimit(self)
            time.sleep(min(left, WAIT_SLEEP))

    def _give_back(self, held: Held) -> None:
        # One round trip: the release and the counters of this hold. The wait is
        # counted here, with the hold, rather than in a round trip of its own
        # before the block runs.
        now = time.monotonic()
        waited = held.acquired_at - held.started
        client = redis_client()
        slots_key, stats_key = self.state_keys(layout_of(client))
        commands: list[tuple[Any, ...]] = [lua("limiter/lua/concurrent_release").command([slots_key], [held.slot])]
        if waited < WAIT_SLEEP:
            commands.append(("HINCRBY", stats_key, "immediate", 1))
        else:
            commands.append(("HINCRBY", stats_key, "waited", 1))
            commands.append(("HINCRBY", stats_key, "wait_time", int(waited)))
        commands.append(("HINCRBY", stats_key, "held_time", int(now - held.acquired_at)))
        commands.append(("EXPIRE", stats_key, self.ttl))
        released = send(commands, client)[0]
        if int(released) == 0:
            # Our slot was already evicted: this holder outran lock_timeout, so for a
            # while more than `limit` callers ran at once. That is an overage. (Running
            # out of wait_timeout is not; it shows in the job's `overrated` count.)
            send([("HINCRBY", stats_key, "overages", 1), ("EXPIRE", stats_key, self.ttl)], client)

    def status(self) -> dict[str, Any]:
        """Slots held, the limit, the soonest slot expiry, plus the counters."""
        client = redis_client()
        slots_key, stats_key = self.state_keys(layout_of(client))
        used, first, stats = send([("ZCARD", slots_key), ("ZRANGE", slots_key, 0, 0, "WITHSCORES"),
                                   ("HGETALL", stats_key)], client)
        reset_at = float(first[1]) if first else None
        result = self._status(int(used), self.limit, reset_at)
        counters = dict(zip(stats[::2], stats[1::2], strict=True)) if isinstance(stats, list) else stats
        for field in COUNTERS:
            result[field] = int(counters.get(field.encode(), 0))
        return result

