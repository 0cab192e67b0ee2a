"""Plugs encrypted arguments into the engine (ENT-601): always installed; each
middleware checks the job's ``encrypt`` flag and the keys in force when it runs."""

from __future__ import annotations


def install_client() -> None:
    from .. import middleware
    from .client import EncryptionClientMiddleware

    # Innermost, so it seals last and nothing else sees the envelope.
    middleware.register("client", "encryption", EncryptionClientMiddleware, position=50)


def install_server() -> None:
    from .. import middleware
    from .middleware import EncryptionServerMiddleware

    # Outermost, so it opens first and puts the envelope back last.
    middleware.register("server", "encryption", EncryptionServerMiddleware, position=-50)
