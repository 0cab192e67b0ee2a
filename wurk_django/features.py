"""The built-in features, and the one place that plugs them into the engine.

Each feature lives in its own package (``wurk_django.batch``,
``wurk_django.limiter``, ...) with an ``install`` module whose ``install()``
registers what the feature adds to the engine's seams:

* client/server middleware: :func:`wurk_django.middleware.register`;
* commands carried in the same round trip as a push: :func:`wurk_django.writer.register_hook`;
* what happens when a job dies: :func:`wurk_django.server.death.register_handler`;
* background components of a worker process: :func:`wurk_django.server.launcher.register_component`;
* admin pages: :func:`wurk_django.admin_pages.register`.

``install()`` runs once per process, lazily, the first time any seam is read,
so a process that never builds a chain or a launcher pays nothing. It must not
touch Redis or Django settings: a feature whose setting is off decides that at
run time (in its middleware or component), not at install time.
"""

from __future__ import annotations

import importlib
import logging
import threading

logger = logging.getLogger("wurk_django")

#: Packages under ``wurk_django`` that have an ``install`` module. Order is
#: irrelevant: positions in each registry fix the order of execution.
BUILTIN: tuple[str, ...] = (
    "batch",
    "unique",
    "encryption",
    "expiry",
    "limiter",
    "statsd",
    "otel",
    "history",
    "profiling",
    "leader",
    "periodic",
)

_lock = threading.RLock()
_installed = False
_installing = False


def install() -> None:
    """Install every built-in feature once (idempotent, thread-safe).

    ``_installed`` turns true only once every feature is in: a thread that saw
    it true early would build a chain without them (a push that skips the
    unique lock). Other threads wait on the lock meanwhile; the installing
    thread itself may come back here (an install importing a seam) and returns.
    """
    global _installed, _installing
    if _installed:
        return
    with _lock:
        if _installed or _installing:
            return
        _installing = True
        try:
            for name in BUILTIN:
                module = importlib.import_module(f"wurk_django.{name}.install")
                module.install()
            _installed = True
        finally:
            _installing = False
