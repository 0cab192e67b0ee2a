"""Plugs leader election into the worker: a launcher component that campaigns."""

from __future__ import annotations

import dataclasses
from typing import Any

POSITION = 10  # before every leader-gated component (periodic 20, rollups 30)


def build(launcher: Any):
    from . import set_current
    from .election import Leader

    leader = Leader(
        launcher.config,
        identity=launcher.state.identity,
        **dataclasses.asdict(launcher.config.leader),
    )
    set_current(leader)
    return _Component(leader)


class _Component:
    """Starts the campaign with the worker; stops (and releases the lock) with it."""

    def __init__(self, leader) -> None:
        self.leader = leader

    def start(self) -> None:
        self.leader.start()

    def stop(self) -> None:
        from . import current, set_current

        self.leader.stop()
        if current() is self.leader:
            set_current(None)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.leader, name)


def install_server() -> None:
    from ..server.launcher import register_component

    # cluster=True: the lock, token and info are the {leader} slot's keys on a cluster (issue 46).
    register_component("leader", build, position=POSITION, cluster=True)
