"""Rate limiters shared by every process on one Redis (Sidekiq Enterprise's, with
Ruby wurk's Redis layout, so Ruby and Python processes share a limiter by name).

::

    from wurk_django import limiter

    ERP = limiter.concurrent("erp", 3, wait_timeout=5, lock_timeout=30)
    STRIPE = limiter.window("stripe", 100, "second")

    ERP.within_limit(call_erp, order_id)      # waits for room, or raises limiter.OverLimit
    with STRIPE.acquire() as held:            # the same, as a context manager
        ...

Inside a job, an :class:`OverLimit` reschedules the job with a backoff instead
of failing it (see docs/limiters.md).
"""

from __future__ import annotations

import inspect
from typing import Any

from .base import Held, Limiter, OverLimit
from .bucket_limiter import Bucket
from .concurrent_limiter import Concurrent
from .leaky_limiter import Leaky
from .listing import build, names
from .points_limiter import Points
from .unlimited_limiter import Unlimited
from .window_limiter import Window

TYPES: dict[str, type[Limiter]] = {
    "concurrent": Concurrent, "bucket": Bucket, "window": Window, "leaky": Leaky, "points": Points,
}

__all__ = [
    "OverLimit", "Held", "Limiter", "Concurrent", "Bucket", "Window", "Leaky", "Points", "Unlimited",
    "concurrent", "bucket", "window", "leaky", "points", "unlimited", "build", "names", "TYPES",
]


def _known(klass: type, options: dict[str, Any]) -> None:
    accepted = inspect.signature(klass.__init__).parameters
    unknown = sorted(k for k in options if k not in accepted or k in ("self", "name"))
    if unknown:
        raise ValueError(f"{klass.__name__.lower()} limiter takes no option {', '.join(map(repr, unknown))}")


def concurrent(name: str, limit: int, **options: Any) -> Concurrent:
    """At most ``limit`` calls running at once. Keywords: ``wait_timeout=5`` (seconds to
    wait for a slot), ``lock_timeout=30`` (seconds after which a holder's slot is
    reclaimed), ``policy="raise"|"ignore"``, ``backoff``, ``ttl``, ``reschedule``."""
    _known(Concurrent, options)
    return Concurrent(name, limit, **options)


def bucket(name: str, count: int, interval: str, **options: Any) -> Bucket:
    """At most ``count`` calls per calendar ``interval`` ("second", "minute", "hour", "day")."""
    _known(Bucket, options)
    return Bucket(name, count, interval, **options)


def window(name: str, count: int, interval: str | int, **options: Any) -> Window:
    """At most ``count`` calls in any sliding ``interval`` (a unit name or seconds)."""
    _known(Window, options)
    return Window(name, count, interval, **options)


def leaky(name: str, bucket_size: int, drain: str | int, **options: Any) -> Leaky:
    """A bucket of ``bucket_size`` that drains completely every ``drain`` (unit or seconds)."""
    _known(Leaky, options)
    return Leaky(name, bucket_size, drain, **options)


def points(name: str, initial_points: int | float, refill_per_second: int | float = 0, **options: Any) -> Points:
    """A balance of ``initial_points`` refilled at ``refill_per_second``; each call passes
    ``estimate=`` its cost and may settle it with ``held.points_used(actual)``."""
    _known(Points, options)
    return Points(name, initial_points, refill_per_second, **options)


def unlimited(*_args: Any, **_options: Any) -> Unlimited:
    """A limiter that always runs the call and touches no Redis."""
    return Unlimited()
