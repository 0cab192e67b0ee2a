"""Register the profiling middleware (innermost on the server side: it times the job's own
code) and the Profiles admin page."""

from __future__ import annotations

MIDDLEWARE_POSITION = 20


def install_server() -> None:
    from .. import middleware
    from .middleware import ProfileMiddleware

    middleware.register("server", "profile", ProfileMiddleware, position=MIDDLEWARE_POSITION)


def install_admin() -> None:
    from django.utils.translation import gettext_lazy

    from ..admin_pages import Page, register

    register(Page("profiles", gettext_lazy("Profiles"), "wurk_profiles", _urls, 140))


def _urls(model_admin):
    from .admin import urls

    return urls(model_admin)
