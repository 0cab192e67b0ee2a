"""Burst mode: run until the queues are empty, then stop (``manage.py wurk --burst``, DJ-032, DJ-040)."""

from __future__ import annotations

import time

from ..conf import Config
from ..connection import get_redis
from .launcher import Launcher


def drained(launcher: Launcher) -> bool:
    """True when every queue this worker serves is empty and no job is running."""
    if launcher.state.busy_count():
        return False
    pipe = get_redis(config=launcher.config).pipeline(transaction=False)
    for name in launcher.manager.fetcher.order.names:
        pipe.llen(f"queue:{name}")
    return not any(pipe.execute()) and not launcher.state.busy_count()


def run_burst(config: Config | None = None, timeout: float = 30.0, poll: float = 0.05) -> bool:
    """Run a worker in this process until its queues are empty; True if they emptied in time.

    For tests and one-off scripts. Jobs fetched just before the queues looked
    empty still finish: the stop drains running jobs as usual.
    """
    launcher = Launcher(config or Config(), embedded=True)
    launcher.run()
    deadline = time.monotonic() + timeout
    emptied = False
    try:
        while time.monotonic() < deadline:
            if drained(launcher):
                emptied = True
                break
            time.sleep(poll)
    finally:
        launcher.stop()
    return emptied
