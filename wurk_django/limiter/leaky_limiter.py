"""Leaky bucket: a level that drains steadily (``bucket_size`` per ``drain``
period); each call adds one and is admitted while it fits. Calls are spread
out instead of arriving in bursts at period starts."""

from __future__ import annotations

import time
from typing import Any

from ..redis.cluster_layout import SidekiqLayout, layout_of
from ..text import to_text
from . import options as opts
from .base import Held, Limiter, layout, redis_client, run, send

WAIT_SLEEP = 0.05


class Leaky(Limiter):
    type = "leaky"

    def __init__(self, name: str, bucket_size: int, drain: str | int, *,
                 wait_timeout: float = opts.DEFAULT_WAIT_TIMEOUT, backoff: Any = None, ttl: int = opts.DEFAULT_TTL,
                 policy: str = "raise", reschedule: int | None = None, register: bool = True) -> None:
        options: dict[str, Any] = {
            "bucket_size": opts.positive_int("bucket_size", bucket_size),
            "drain": opts.interval("drain", drain, allow_seconds=True),
            "wait_timeout": opts.non_negative_number("wait_timeout", wait_timeout),
            "backoff": opts.backoff(backoff),
            "ttl": opts.ttl(ttl),
        }
        if opts.policy(policy) != "raise":
            options["policy"] = policy
        if opts.reschedule(reschedule) is not None:
            options["reschedule"] = reschedule
        super().__init__(name, options, register=register)
        self.bucket_size = bucket_size
        self.drain_per_sec = bucket_size / opts.seconds(drain)

    def state_keys(self, where: SidekiqLayout | None = None) -> list[str]:
        return [(where or layout()).limiter_leaky(self.name)]

    def _take(self) -> Held:
        deadline = time.monotonic() + self.options["wait_timeout"]
        client = redis_client()
        key = layout_of(client).limiter_leaky(self.name)
        args = [self.bucket_size, repr(self.drain_per_sec), self.ttl]
        while True:
            if int(run("leaky_acquire", [key], args + self._now_args(), client)[0]) == 1:
                return Held(self, True)
            if not self._refused(deadline, WAIT_SLEEP):
                return Held(self, False)

    def status(self) -> dict[str, Any]:
        """The level as the next call would see it (drained since the last call);
        ``reset_at`` is when one more call fits, while the bucket is full."""
        now = self.redis_now()
        client = redis_client()
        level, last = send([("HMGET", layout_of(client).limiter_leaky(self.name), "level", "last")], client)[0]
        current = 0.0
        if level is not None:
            elapsed = max(0.0, now - float(to_text(last))) if last is not None else 0.0
            current = max(0.0, float(to_text(level)) - elapsed * self.drain_per_sec)
        reset_at = now + (current - self.bucket_size + 1) / self.drain_per_sec if current > self.bucket_size - 1 else None
        return self._status(round(current, 3), self.bucket_size, reset_at)
