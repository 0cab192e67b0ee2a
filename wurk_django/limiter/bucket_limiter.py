"""Bucket limiter: at most ``count`` calls per calendar period (second, minute,
hour or day), the counter starting again at the top of each period.

Across a period boundary a burst of up to ``2 × count`` is possible (the end
of one period and the start of the next); the window limiter has no such edge.
"""

from __future__ import annotations

import time
from typing import Any

from ..redis.cluster_layout import SidekiqLayout, layout_of
from . import options as opts
from .base import Held, Limiter, layout, redis_client, run, send

MIN_SLEEP = 0.05


def checked_used(limiter: Limiter, used: Any, count: int) -> int:
    """``used`` must be a whole number of calls that could ever fit."""
    if isinstance(used, bool) or not isinstance(used, int) or used < 1:
        raise ValueError(f"used must be an integer >= 1, not {used!r}")
    if used > count:
        raise ValueError(f"used={used} can never fit in {limiter.type} limiter {limiter.name!r} of {count}")
    return used


class Bucket(Limiter):
    type = "bucket"
    call_options = ("used",)

    def __init__(self, name: str, count: int, interval: str, *, wait_timeout: float = opts.DEFAULT_WAIT_TIMEOUT,
                 backoff: Any = None, ttl: int = opts.DEFAULT_TTL, reschedule: int | None = opts.DEFAULT_RESCHEDULE,
                 policy: str = "raise", register: bool = True) -> None:
        options: dict[str, Any] = {
            "count": opts.positive_int("count", count),
            "interval": opts.interval("interval", interval, allow_seconds=False),
            "wait_timeout": opts.non_negative_number("wait_timeout", wait_timeout),
            "backoff": opts.backoff(backoff),
            "ttl": opts.ttl(ttl),
            "reschedule": opts.reschedule(reschedule),
        }
        if opts.policy(policy) != "raise":
            options["policy"] = policy
        super().__init__(name, options, register=register)
        self.count = count
        self.interval = opts.seconds(interval)

    def _period(self) -> tuple[int, float]:
        """``(epoch, seconds left in it)`` by the Redis clock; the fraction of a second
        matters, or a per-second bucket would sleep a whole second at 0.9 s."""
        now = self.redis_now()
        epoch = int(now // self.interval)
        return epoch, (epoch + 1) * self.interval - now

    def state_keys(self, where: SidekiqLayout | None = None) -> list[str]:
        return [(where or layout()).limiter_bucket(self.name, self._period()[0])]

    def _take(self, used: int = 1) -> Held:
        used = checked_used(self, used, self.count)
        deadline = time.monotonic() + self.options["wait_timeout"]
        client = redis_client()
        where = layout_of(client)
        while True:
            epoch, left_in_period = self._period()
            ok, _current = run("bucket_acquire", [where.limiter_bucket(self.name, epoch)],
                               [self.count, used, 2 * self.interval, repr(left_in_period)], client)
            if int(ok) == 1:
                return Held(self, True)
            # Sleep toward the next period, but never spin faster than 20 times a second.
            if not self._refused(deadline, max(MIN_SLEEP, left_in_period)):
                return Held(self, False)

    def status(self) -> dict[str, Any]:
        epoch, _left = self._period()
        client = redis_client()
        used = send([("GET", layout_of(client).limiter_bucket(self.name, epoch))], client)[0]
        return self._status(int(used or 0), self.count, float((epoch + 1) * self.interval))
