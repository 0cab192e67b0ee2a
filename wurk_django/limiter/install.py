"""Plugs the rate limiters into the engine: the server middleware that reschedules a
job that hit a limit (server part), and the admin's Limits page (admin part)."""

from __future__ import annotations

from typing import Any


def install_server() -> None:
    from .. import middleware
    from .middleware import LimiterMiddleware

    # Outside the user's middleware (they see a clean outcome) but inside batches,
    # unique jobs and decryption, so a reschedule is "handled" to all of them.
    middleware.register("server", "limiter", LimiterMiddleware, position=-20)


def install_admin() -> None:
    from django.utils.translation import gettext_lazy

    from ..admin_pages import Page, register

    def urls(model_admin: Any) -> list:
        from . import admin

        return admin.urls(model_admin)

    register(Page("limits", gettext_lazy("Limits"), "wurk_limits", urls, 90))
