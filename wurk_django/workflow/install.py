"""Plugs workflows into the engine's seams (see :mod:`wurk_django.features`)."""

from __future__ import annotations


def install_server() -> None:
    """Keep step results, record step deaths."""
    from .. import middleware
    from ..server import death
    from . import deaths
    from .middleware import POSITION, WorkflowServerMiddleware

    middleware.register("server", "workflow", WorkflowServerMiddleware, position=POSITION)
    death.register_handler("workflow", deaths.on_death, position=35)


def install_admin() -> None:
    from django.utils.translation import gettext_lazy

    from ..admin_pages import Page, register

    register(Page("workflows", gettext_lazy("Workflows"), "wurk_workflows", _urls, 85))


def _urls(model_admin):
    from .admin import urls

    return urls(model_admin)
