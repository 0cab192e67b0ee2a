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

from typing import Any

from .loops import Loop, LoopSet, set_paused
from .poller import enqueue_now, fire
from .registration import Manager, configure, register, unregister, verify
from .schedule import Schedule

__all__ = [
    "Loop", "LoopSet", "Manager", "Schedule", "configure", "enqueue_now", "fire", "pause", "register",
    "unpause", "unregister", "verify",
]


def pause(lid: str, redis: Any = None) -> bool:
    """Stop a loop from firing until :func:`unpause` (kept in Redis across deploys).
    False when no such loop exists."""
    return set_paused(lid, True, redis)


def unpause(lid: str, redis: Any = None) -> bool:
    return set_paused(lid, False, redis)
