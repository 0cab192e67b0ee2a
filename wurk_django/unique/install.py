"""Plugs unique jobs into the engine: both middleware and the death handler (ENT-201).

Always installed; each piece checks ``WURK["UNIQUE_JOBS"]`` when it runs.
"""

from __future__ import annotations


def install() -> None:
    from .. import middleware
    from ..server import death
    from .lock import release_on_death
    from .middleware import UniqueClientMiddleware, UniqueServerMiddleware

    # Client: before batches (-20), so a dropped duplicate never joins one.
    middleware.register("client", "unique", UniqueClientMiddleware, position=-30)
    # Server: inside decryption and batches, outside rate limiters (-20).
    middleware.register("server", "unique", UniqueServerMiddleware, position=-30)
    death.register_handler("unique", release_on_death, position=30)
