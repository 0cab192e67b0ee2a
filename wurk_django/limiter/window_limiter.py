"""Window limiter: at most ``count`` calls in any sliding ``interval``, measured
from each call (not from calendar boundaries)."""

from __future__ import annotations

import secrets
import time
from typing import Any

from ..redis.cluster_layout import SidekiqLayout, layout_of
from ..text import to_text
from . import options as opts
from .base import Held, Limiter, layout, redis_client, run
from .bucket_limiter import checked_used

#: Longest pause between two attempts while waiting.
MAX_SLEEP = 0.5


class Window(Limiter):
    type = "window"
    call_options = ("used",)

    def __init__(self, name: str, count: int, interval: str | int, *,
                 wait_timeout: float = opts.DEFAULT_WAIT_TIMEOUT, backoff: Any = None, ttl: int = opts.DEFAULT_TTL,
                 reschedule: int | None = opts.DEFAULT_RESCHEDULE, policy: str = "raise",
                 register: bool = True) -> None:
        options: dict[str, Any] = {
            "count": opts.positive_int("count", count),
            "interval": opts.interval("interval", interval, allow_seconds=True),
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

    def state_keys(self, where: SidekiqLayout | None = None) -> list[str]:
        return [(where or layout()).limiter_window(self.name)]

    def _take(self, used: int = 1) -> Held:
        used = checked_used(self, used, self.count)
        deadline = time.monotonic() + self.options["wait_timeout"]
        client = redis_client()
        key = layout_of(client).limiter_window(self.name)
        while True:
            args = [self.count, self.interval, used, self.ttl, secrets.token_hex(8), *self._now_args()]
            if int(run("window_acquire", [key], args, client)[0]) == 1:
                return Held(self, True)
            if not self._refused(deadline, MAX_SLEEP):
                return Held(self, False)

    def status(self) -> dict[str, Any]:
        """Calls inside the window now; ``reset_at`` is when the oldest leaves it.
        Read-only: only an acquire trims old entries."""
        client = redis_client()
        count, oldest = run("window_status", self.state_keys(layout_of(client)), [self.interval, *self._now_args()],
                            client)
        first = float(to_text(oldest))
        return self._status(int(count), self.count, None if first < 0 else first + self.interval)
