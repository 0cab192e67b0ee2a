"""Starting named daemon threads, and injecting the shutdown exception (RUN-101, RUN-803)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from .stopping import async_raise

logger = logging.getLogger("wurk_django.worker")


def spawn(name: str, target: Callable[[], Any], config: Any = None) -> threading.Thread:
    """Run ``target`` on a named daemon thread. An escaping exception is logged with the
    thread's name and handed to ``config``'s error handlers (RUN-101), then the thread ends.

    Daemon threads, because CPython joins non-daemon threads before ``atexit``
    runs, so a stuck job could otherwise block the drain from ever starting.
    """

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # the thread is ending; report whatever ended it
            logger.exception("thread %s died", name)
            if config is not None and not isinstance(exc, SystemExit):
                from ..reporting import notify_handlers

                notify_handlers(exc, {"context": f"thread {name} died", "thread": name}, config)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    return thread


def raise_in_thread(thread: threading.Thread, exc_type: type[BaseException]) -> bool:
    """Ask ``thread`` to raise ``exc_type`` at its next bytecode (best effort, see
    :mod:`.async_raise`). It cannot interrupt a blocking C call; the caller bounds its
    wait afterwards."""
    if not thread.is_alive():
        return False
    return async_raise.raise_in(thread.ident, exc_type)
