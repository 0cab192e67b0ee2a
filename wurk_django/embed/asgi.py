"""ASGI lifespan wrapper for embedded mode (DJ-064).

Django's ASGI handler refuses every scope but ``http`` (and ``websocket`` via
Channels), so a server's lifespan ``startup``/``shutdown`` events never reach
it. :func:`wrap` answers them: startup starts embedded wurk in this process,
shutdown drains it. Every other scope goes to the wrapped app untouched::

    # asgi.py
    from django.core.asgi import get_asgi_application
    from wurk_django.asgi import wrap

    application = wrap(get_asgi_application())

Works with ``uvicorn --workers N`` (each worker is a fresh interpreter with its
own lifespan) and gunicorn's ``asgi`` worker. With a mode other than
"embedded" the lifespan is still answered, and nothing starts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from . import boot, embedded

logger = logging.getLogger("wurk_django.embedded")

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def wrap(app: ASGIApp, *, drain_timeout: float | None = None) -> ASGIApp:
    """``app`` plus lifespan handling: startup starts embedded wurk, shutdown drains it.

    ``drain_timeout`` bounds the drain at shutdown (``WURK["TIMEOUT"]`` when
    None); keep it at least 5 s below the time the server allows its workers
    to exit.
    """

    async def application(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await app(scope, receive, send)
            return
        await _lifespan(receive, send, drain_timeout)

    application.__wrapped__ = app  # type: ignore[attr-defined]
    return application


async def _lifespan(receive: Receive, send: Send, drain_timeout: float | None) -> None:
    while True:
        message = await receive()
        kind = message.get("type")
        if kind == "lifespan.startup":
            try:
                if boot.current().action == boot.SWARM:
                    # A co-hosted swarm forks, which is only safe from the main thread (RUN-820).
                    boot.start("ASGI lifespan")
                else:
                    # The embedded boot talks to Redis with blocking calls; keep them off the event loop.
                    await asyncio.to_thread(boot.start, "ASGI lifespan", drain_timeout=drain_timeout)
            except Exception:
                # The site must come up even when wurk cannot (DJ-063).
                logger.exception("wurk: embedded start failed during ASGI lifespan startup")
            await send({"type": "lifespan.startup.complete"})
        elif kind == "lifespan.shutdown":
            try:
                await asyncio.to_thread(embedded.stop, drain_timeout)
            except Exception:
                logger.exception("wurk: embedded stop failed during ASGI lifespan shutdown")
            await send({"type": "lifespan.shutdown.complete"})
            return
