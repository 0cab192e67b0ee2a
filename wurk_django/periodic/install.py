"""Plugs periodic jobs into the worker (the poller component) and the admin (the Periodic page)."""

from __future__ import annotations

from typing import Any

POSITION = 20  # after the leader (10), whose promotion it listens to


def build(launcher: Any):
    from .clock import from_env
    from .poller import Poller

    return Poller(launcher.config, clock=from_env())


def _urls(admin: Any) -> list:
    from .admin import urls

    return urls(admin)


def install_server() -> None:
    from ..server.launcher import register_component

    # cluster=True: each loop's marks and history are its {loop:<lid>} slot's on a cluster (issue 46).
    register_component("periodic", build, position=POSITION, cluster=True)


def install_admin() -> None:
    from django.utils.translation import gettext_lazy

    from ..admin_pages import Page, register

    register(Page("periodic", gettext_lazy("Periodic"), "wurk_periodic", _urls, 100))
