"""Plugs batches into the engine's seams (see :mod:`wurk_django.features`)."""

from __future__ import annotations


def install() -> None:
    from .. import middleware, writer
    from ..server import death
    from . import callbacks, deaths, hooks
    from .middleware import BatchClientMiddleware, BatchServerMiddleware

    del callbacks  # imported for its job classes (the callback runner, the empty marker)
    middleware.register("client", "batch", BatchClientMiddleware, position=-20)
    middleware.register("server", "batch", BatchServerMiddleware, position=-40)
    writer.register_hook("batch", hooks.write_hook, position=20)
    death.register_handler("batch", deaths.on_death, position=20)
    if _admin_installed():
        from .admin import register_pages

        register_pages()


def _admin_installed() -> bool:
    """The Batches tab needs Django's admin; a worker of a project without it (or run from
    a bare Config, with no settings) still runs batches."""
    try:
        from django.apps import apps

        return apps.is_installed("django.contrib.admin")
    except Exception:  # no settings, or the app registry not ready
        return False
