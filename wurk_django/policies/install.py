"""Plugs debounce and throttle into the push (issue 47 item 3): a client middleware and a write hook;
and the admin's Policies page."""

from __future__ import annotations

from typing import Any

#: Beside unique jobs (-30), before batches (-20): a dropped push never joins a batch.
POSITION = -29


def install_client() -> None:
    from .. import middleware
    from ..client import writer
    from .client import PolicyClientMiddleware, install_cluster, write_hook

    middleware.register("client", "policies", PolicyClientMiddleware, position=POSITION)
    writer.register_hook("policies", write_hook, position=POSITION)
    install_cluster()


def install_admin() -> None:
    from django.utils.translation import gettext_lazy

    from ..admin_pages import Page, register

    def urls(model_admin: Any) -> list:
        from . import admin

        return admin.urls(model_admin)

    register(Page("policies", gettext_lazy("Policies"), "wurk_policies", urls, 95))
