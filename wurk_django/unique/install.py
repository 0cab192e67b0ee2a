"""Plugs unique jobs into the engine (ENT-201): the lock on push (client part); its release
when the job ran or died (server part).

Always installed; each piece checks ``WURK["UNIQUE_JOBS"]`` when it runs.
"""

from __future__ import annotations


def install_client() -> None:
    from .. import middleware
    from .client import UniqueClientMiddleware

    # Before batches (-20), so a dropped duplicate never joins one.
    middleware.register("client", "unique", UniqueClientMiddleware, position=-30)


def install_death() -> None:
    """Free a unique lock when the engine gives up on its job."""
    from .. import death
    from .lock import release_on_death

    death.register_handler("unique", release_on_death, position=30)


def install_server() -> None:
    from .. import middleware
    from .middleware import UniqueServerMiddleware

    # Inside decryption and batches, outside rate limiters (-20).
    middleware.register("server", "unique", UniqueServerMiddleware, position=-30)
