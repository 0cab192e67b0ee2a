from __future__ import annotations

from .. import middleware
from . import ExpiryMiddleware

#: Inside batch (-40), unique (-30) and limiter (-20), outside the user's middleware:
#: those features see the skipped job as one that returned.
POSITION = -10


def install() -> None:
    middleware.register("server", "expiry", ExpiryMiddleware, position=POSITION)
