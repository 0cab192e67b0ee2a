"""Periodic (cron) jobs, fired once per tick across the whole cluster.

In settings (registered by every worker at boot)::

    WURK = {"PERIODIC": [
        {"cron": "0 4 * * *", "job": "shop.jobs.Nightly", "queue": "low", "args": ["x"], "tz": "Asia/Tokyo"},
        {"cron": "*/5 * * * *", "job": "shop.jobs.Sweep"},
    ]}

or from code, for computed schedules::

    from wurk_django import periodic
    periodic.register("0 4 * * *", "shop.jobs.Nightly", queue="low", args=["x"], tz="Asia/Tokyo")

Only the cluster's leader (see :mod:`wurk_django.leader`) enqueues; see docs/periodic.md.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .loops import Loop, LoopSet
    from .poller import enqueue_now, fire
    from .registration import Manager, configure, register, unregister, verify
    from .schedule import Schedule

__all__ = [
    "Loop", "LoopSet", "Manager", "Schedule", "configure", "enqueue_now", "fire", "pause", "register",
    "unpause", "unregister", "verify",
]

#: Where each public name lives. Loaded on first use (PEP 562): importing anything of
#: this package (its settings check, its install module) must not load the poller,
#: which imports the worker engine, nor the cron library, which only the poller uses.
_HOMES = {
    "Loop": "loops", "LoopSet": "loops",
    "enqueue_now": "poller", "fire": "poller",
    "Manager": "registration", "configure": "registration", "register": "registration",
    "unregister": "registration", "verify": "registration",
    "Schedule": "schedule",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{home}", __name__), name)
    globals()[name] = value  # once: later lookups skip this function
    return value


def pause(lid: str, redis: Any = None) -> bool:
    """Stop a loop from firing until :func:`unpause` (kept in Redis across deploys).
    False when no such loop exists."""
    from .loops import set_paused

    return set_paused(lid, True, redis)


def unpause(lid: str, redis: Any = None) -> bool:
    from .loops import set_paused

    return set_paused(lid, False, redis)
