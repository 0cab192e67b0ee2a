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
    from ..admin_pages import Page, register

    # Only the page's entry here: its views (and the admin package, which needs the app
    # registry) load when the admin builds its URLs, so a worker run from a bare Config works.
    register(Page("batches", "Batches", "wurk_batches", _urls, 80))


def _urls(model_admin):
    from .admin import _urls as urls

    return urls(model_admin)
