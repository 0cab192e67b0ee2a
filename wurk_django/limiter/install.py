"""Plugs the rate limiters into the engine: the server middleware that reschedules a
job that hit a limit, and the admin's Limits page."""

from __future__ import annotations

from typing import Any


def install() -> None:
    from django.apps import apps

    from .. import middleware
    from .middleware import LimiterMiddleware

    # Outside the user's middleware (they see a clean outcome) but inside batches,
    # unique jobs and decryption, so a reschedule is "handled" to all of them.
    middleware.register("server", "limiter", LimiterMiddleware, position=-20)
    if apps.ready:
        add_page()
    else:
        # The admin package imports models, which needs the app registry: a worker run
        # from a bare Config has none (and no admin), and a process still loading its
        # apps gets the page when its first request starts, before admin URLs are built.
        from django.core.signals import request_started

        request_started.connect(_add_page_on_request, dispatch_uid="wurk_django.limiter.page")


def add_page() -> None:
    from ..admin.pages import Page, register

    def urls(model_admin: Any) -> list:
        from . import admin

        return admin.urls(model_admin)

    register(Page("limits", "Limits", "wurk_limits", urls, 90))


def _add_page_on_request(**_kwargs: Any) -> None:
    from django.core.signals import request_started

    request_started.disconnect(dispatch_uid="wurk_django.limiter.page")
    add_page()
