"""Burst mode: run until the queues are empty, then stop (``manage.py wurk --burst``, DJ-032, DJ-040)."""

from __future__ import annotations

import time

from ..conf import Config
from ..redis.cluster_layout import layout_of
from ..redis.connection import get_redis
from .launcher import Launcher


def _holding(launcher: Launcher) -> bool:
    """A job is off its queue but not finished: running, handed to a thread that has not
    begun it yet, or fetched ahead (a fetcher of the user's own may not count those)."""
    if launcher.state.busy_count():
        return True
    for manager in launcher.managers:  # every capsule's
        if any(p.unit is not None for p in manager.alive_processors()):
            return True
        in_hand = getattr(manager.fetcher, "in_hand", None)
        if in_hand and in_hand():
            return True
    return False


def drained(launcher: Launcher) -> bool:
    """True when every queue this worker serves is empty and no job is running or
    waiting in this process's hands."""
    if _holding(launcher):
        return False
    # The worker on a Redis Cluster carries its RedisCluster (issue 46 item 3): each queue's
    # list is then in its own slot, and one non-transactional pipeline asks each primary once.
    client = getattr(launcher, "client", None) or get_redis(config=launcher.config)
    layout = layout_of(client)
    pipe = client.pipeline(transaction=False)
    for name in launcher.queue_names:
        pipe.llen(layout.queue(name))
    return not any(pipe.execute()) and not _holding(launcher)


def run_burst(config: Config | None = None, timeout: float = 30.0, poll: float = 0.05) -> bool:
    """Run a worker in this process until its queues are empty; True if they emptied in time.

    For tests and one-off scripts. Jobs fetched just before the queues looked
    empty still finish: the stop drains running jobs as usual.
    """
    launcher = Launcher(config or Config(), embedded=True)
    launcher.run()
    deadline = time.monotonic() + timeout
    emptied = False
    seen = 0
    try:
        while time.monotonic() < deadline:
            # Twice in a row: a thread between taking a job off the queue and showing it
            # anywhere above is a few bytecodes long, and cannot span a poll interval.
            seen = seen + 1 if drained(launcher) else 0
            if seen >= 2:
                emptied = True
                break
            time.sleep(poll)
    finally:
        launcher.stop()
    return emptied
