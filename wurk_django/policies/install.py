"""Plugs debounce and throttle into the push (issue 47 item 3): a client middleware and a write hook."""

from __future__ import annotations

#: Beside unique jobs (-30), before batches (-20): a dropped push never joins a batch.
POSITION = -29


def install_client() -> None:
    from .. import middleware
    from ..client import writer
    from .client import PolicyClientMiddleware, write_hook

    middleware.register("client", "policies", PolicyClientMiddleware, position=POSITION)
    writer.register_hook("policies", write_hook, position=POSITION)
