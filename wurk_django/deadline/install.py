"""Plugs deadlines into the worker: the server middleware that buries a job past its
``deadline`` and hands a running one's deadline to the watchdog."""

from __future__ import annotations

#: Inside batch (-40) and unique (-30), which see a buried job as a death (their death
#: handlers run); outside the limiter (-20), so a job past its deadline takes no limiter
#: slot, and outside expiry (-10): a job past both is dead, not skipped as a success.
POSITION = -25


def install_server() -> None:
    from .. import middleware
    from .middleware import DeadlineMiddleware

    middleware.register("server", "deadline", DeadlineMiddleware, position=POSITION)
