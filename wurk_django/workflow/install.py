"""Plugs workflows into the engine's seams (see :mod:`wurk_django.features`)."""

from __future__ import annotations


def install_death() -> None:
    """Record a workflow step's death."""
    from .. import death
    from . import deaths

    death.register_handler("workflow", deaths.on_death, position=35)


def install_server() -> None:
    """Keep step results."""
    from .. import middleware
    from .middleware import POSITION, WorkflowServerMiddleware

    middleware.register("server", "workflow", WorkflowServerMiddleware, position=POSITION)


def install_admin() -> None:
    from django.utils.translation import gettext_lazy

    from ..admin_pages import Page, register

    register(Page("workflows", gettext_lazy("Workflows"), "wurk_workflows", _urls, 85))


def _urls(model_admin):
    from .admin import urls

    return urls(model_admin)
