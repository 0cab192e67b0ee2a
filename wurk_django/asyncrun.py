"""Running ``async def perform`` on a worker thread (RUN-850).

Each thread keeps one :class:`asyncio.Runner` for its lifetime instead of
creating an event loop per job. A hard shutdown cannot interrupt a loop that
waits in ``epoll`` by raising into its thread (nothing runs there to see the
exception), so :func:`cancel` cancels the job's task from the shutdown's thread
instead; the job sees ``CancelledError`` at its ``await``, its ``finally``
blocks run, and the processor gets :class:`~wurk_django.errors.Shutdown`
(the job was put back on its queue: no ACK).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any

from .errors import Shutdown

_local = threading.local()
# thread ident -> [loop, task, the exception to raise when cancelled from outside (None: not
# cancelled from outside)]: the coroutine each thread runs now
_running: dict[int, list[Any]] = {}


def run_coroutine(coro: Awaitable[Any]) -> Any:
    runner = getattr(_local, "runner", None)
    if runner is None:
        runner = _local.runner = asyncio.Runner()
    ident = threading.get_ident()
    entry: list[Any] = [None, None, None]

    async def tracked() -> Any:
        entry[0], entry[1] = asyncio.get_running_loop(), asyncio.current_task()
        _running[ident] = entry
        return await coro

    try:
        return runner.run(tracked())
    except asyncio.CancelledError:
        if entry[2] is not None:
            raise entry[2]() from None
        raise
    finally:
        _running.pop(ident, None)


def cancel(thread: threading.Thread, exc_type: type[BaseException] = Shutdown) -> bool:
    """Cancel the coroutine ``thread`` is running, if it runs one; True if asked. The job
    sees ``CancelledError`` at its ``await``; its runner then raises ``exc_type``
    (the shutdown's, or a time limit's / a revoke's soft stop)."""
    entry = _running.get(thread.ident or 0)
    if entry is None or entry[0] is None:
        return False
    entry[2] = exc_type
    try:
        entry[0].call_soon_threadsafe(entry[1].cancel)
    except RuntimeError:  # the loop closed meanwhile: the coroutine has ended
        return False
    return True


def close() -> None:
    runner = getattr(_local, "runner", None)
    if runner is not None:
        runner.close()
        _local.runner = None
