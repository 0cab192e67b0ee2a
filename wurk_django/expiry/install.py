"""Plugs expiring jobs into the worker: a server middleware that skips a job past its ``expires_in``."""

from __future__ import annotations

#: Inside batch (-40), unique (-30) and limiter (-20), outside the user's middleware:
#: those features see the skipped job as one that returned.
POSITION = -10


def install_server() -> None:
    from .. import middleware
    from . import ExpiryMiddleware

    middleware.register("server", "expiry", ExpiryMiddleware, position=POSITION)
