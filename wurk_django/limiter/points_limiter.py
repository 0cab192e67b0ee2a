"""Points limiter: a balance of ``initial_points`` refilled at
``refill_per_second``; each call spends an estimate of its cost up front and
may settle the real cost afterwards. There is no wait: a call the balance
cannot cover is refused at once."""

from __future__ import annotations

from typing import Any

from ..redis.cluster_layout import SidekiqLayout, layout_of
from ..text import to_text
from . import options as opts
from .base import Held, Limiter, OverLimit, layout, redis_client, run, send


class PointsHeld(Held):
    __slots__ = ()

    def points_used(self, actual: float) -> float:
        """Settle with the real cost: the difference from the estimate goes back to
        (or, when it cost more, comes out of) the balance. Returns the new balance."""
        if isinstance(actual, bool) or not isinstance(actual, (int, float)) or actual < 0:
            raise ValueError(f"points_used needs a number >= 0, not {actual!r}")
        limiter = self.limiter
        client = redis_client()
        return float(to_text(run("points_refund", limiter.state_keys(layout_of(client)),
                                 [repr(float(self.estimate - actual)), limiter.initial, limiter.ttl], client)))


class Points(Limiter):
    type = "points"
    call_options = ("estimate",)

    def __init__(self, name: str, initial_points: int | float, refill_per_second: int | float = 0, *,
                 backoff: Any = None, ttl: int = opts.DEFAULT_TTL, reschedule: int | None = None,
                 register: bool = True) -> None:
        options: dict[str, Any] = {
            "initial": opts.positive_number("initial_points", initial_points),
            "refill": opts.non_negative_number("refill_per_second", refill_per_second),
            "backoff": opts.backoff(backoff),
            "ttl": opts.ttl(ttl),
        }
        if opts.reschedule(reschedule) is not None:
            options["reschedule"] = reschedule
        super().__init__(name, options, register=register)
        self.initial = initial_points
        self.refill = refill_per_second

    def state_keys(self, where: SidekiqLayout | None = None) -> list[str]:
        return [(where or layout()).limiter_points(self.name)]

    def _take(self, estimate: float | None = None) -> Held:
        if isinstance(estimate, bool) or not isinstance(estimate, (int, float)) or estimate <= 0:
            raise ValueError(f"points limiter {self.name!r} needs estimate= a number > 0, not {estimate!r}")
        if estimate > self.initial:
            raise ValueError(f"estimate={estimate} can never fit in points limiter {self.name!r} of {self.initial}")
        client = redis_client()
        ok, _balance = run("points_acquire", self.state_keys(layout_of(client)),
                           [self.initial, self.refill, estimate, self.ttl, *self._now_args()], client)
        if int(ok) != 1:
            raise OverLimit(self)
        return PointsHeld(self, True, estimate=estimate)

    def available(self, now: float | None = None) -> float:
        """The balance the next call would see (refilled since the last call)."""
        now = self.redis_now() if now is None else now
        client = redis_client()
        points, last = send([("HMGET", layout_of(client).limiter_points(self.name), "points", "last")], client)[0]
        if points is None:
            return float(self.initial)
        elapsed = max(0.0, now - float(to_text(last))) if last is not None else 0.0
        return min(float(self.initial), float(to_text(points)) + elapsed * self.refill)

    def status(self) -> dict[str, Any]:
        now = self.redis_now()
        available = self.available(now)
        cap = float(self.initial)
        reset_at = now + (cap - available) / self.refill if available < cap and self.refill > 0 else None
        return self._status(round(cap - available, 3), cap, reset_at)
