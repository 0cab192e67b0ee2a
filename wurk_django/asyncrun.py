"""Running ``async def perform`` on a worker thread (RUN-850).

Each thread keeps one :class:`asyncio.Runner` for its lifetime instead of
creating an event loop per job.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable
from typing import Any

_local = threading.local()


def run_coroutine(coro: Awaitable[Any]) -> Any:
    runner = getattr(_local, "runner", None)
    if runner is None:
        runner = _local.runner = asyncio.Runner()
    return runner.run(coro)  # type: ignore[arg-type]


def close() -> None:
    runner = getattr(_local, "runner", None)
    if runner is not None:
        runner.close()
        _local.runner = None
