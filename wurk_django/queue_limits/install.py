"""Plugs queue limits into the worker: the component that frees dead processes' slots.

The fetch itself and the settle take and free slots in the engine (server/fetch/reliable.py,
server/run/settle.py), through :mod:`.caps`; they do nothing while ``QUEUE_LIMITS`` is empty.
On a Redis Cluster the worker's fetcher is :class:`.cluster.CappedClusterFetch` and this
component is :class:`.cluster.ClusterKeeper` (issue 46 item 3).
"""

from __future__ import annotations

from typing import Any

POSITION = 5  # nothing depends on it; early, so slots of a killed sibling go soon after boot


def build(launcher: Any) -> Any:
    limits = launcher.config.queue_limits
    names = [name for name in launcher.queue_names if name in limits] if limits else []
    if not names:
        return None
    if getattr(launcher, "client", None) is not None:
        # The worker on a Redis Cluster (issue 46 item 3): its fetcher takes the slots in
        # each queue's hash slot, and the cluster reaper's rules judge the holders.
        from .cluster import ClusterKeeper

        return ClusterKeeper(launcher, names)
    from .caps import Keeper, logger

    for manager in launcher.managers:
        if not hasattr(manager.fetcher, "_caps"):
            # A FETCH_CLASS of the user's own: it takes jobs without slots (BasicFetch refuses).
            logger.warning("QUEUE_LIMITS is ignored by the fetcher %s, which takes jobs without slots; "
                           "the limits need the default reliable fetch", type(manager.fetcher).__name__)

    return Keeper(launcher, names)


def install_server() -> None:
    from ..server.launcher import register_component

    register_component("queue_limits", build, position=POSITION, cluster=True)
