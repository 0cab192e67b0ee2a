"""Plugs batches into the engine's seams, in three parts (see :mod:`wurk_django.features`)."""

from __future__ import annotations


def install_client() -> None:
    """Stamp pushes inside ``jobs()`` with the batch, and register each job in its batch as it is pushed."""
    from .. import middleware
    from ..client import writer
    from . import cluster, hooks
    from .client import BatchClientMiddleware

    middleware.register("client", "batch", BatchClientMiddleware, position=-20)
    writer.register_hook("batch", hooks.write_hook, position=20)
    cluster.install()  # on a Redis Cluster the hook's scripts are split in two steps (issue 46 item 3)


def install_death() -> None:
    """Record a batch job's death."""
    from .. import death
    from . import deaths

    death.register_handler("batch", deaths.on_death, position=20)


def install_server() -> None:
    """Ack batch jobs as they end."""
    from .. import middleware
    from . import callbacks
    from .middleware import BatchServerMiddleware

    del callbacks  # imported for its job classes (the callback runner, the empty marker)
    middleware.register("server", "batch", BatchServerMiddleware, position=-40)


def install_admin() -> None:
    from django.utils.translation import gettext_lazy

    from ..admin_pages import Page, register

    # Only the page's entry here: its views (and the admin package, which needs the app
    # registry) load when the admin builds its URLs, so a worker run from a bare Config works.
    register(Page("batches", gettext_lazy("Batches"), "wurk_batches", _urls, 80))


def _urls(model_admin):
    from .admin import _urls as urls

    return urls(model_admin)
