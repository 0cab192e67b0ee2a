"""Register the rollup component (launcher position 30) and the Historical admin page (120)."""

from __future__ import annotations

COMPONENT_POSITION = 30


def install_server() -> None:
    from ..server.launcher import register_component
    from .component import factory

    register_component("history", factory, position=COMPONENT_POSITION, cluster=True)


def install_admin() -> None:
    from django.utils.translation import gettext_lazy

    from ..admin_pages import Page, register

    register(Page("history", gettext_lazy("Historical"), "wurk_history", _urls, 120))


def _urls(model_admin):
    from .admin import urls  # the admin views load only where the admin's URLs are built

    return urls(model_admin)
