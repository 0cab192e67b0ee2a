"""The built-in features, and the one place that plugs them into the engine.

Each feature lives in its own package (``wurk_django.batch``,
``wurk_django.limiter``, ...) with an ``install`` module. That module installs
the feature in up to three parts, one function each, so that a process loads
only the part it uses:

* ``install_client()``: what a pushing process needs, its client middleware
  (:func:`wurk_django.middleware.register` with ``"client"``) and the commands
  carried in the same round trip as a push
  (:func:`wurk_django.client.writer.register_hook`);
* ``install_death()``: what happens when a job dies
  (:func:`wurk_django.death.register_handler`), in a worker and wherever else a
  job is buried (a kill or a revoke through the data API), without the engine;
* ``install_server()``: what a worker needs, its server middleware and
  background components of a worker process
  (:func:`wurk_django.server.launcher.register_component`);
* ``install_admin()``: its admin pages (:func:`wurk_django.admin_pages.register`).

A feature defines only the parts it has, and lists them in :data:`BUILTIN`.
Each part runs once per process, lazily, the first time a seam of that part is
read: the client chain and the writer's hooks install the client part; the
server chain, the death handlers and the launcher the server part (and the
client part with it: a worker pushes too); the admin's page list the admin
part. A web process that only pushes thus never imports the worker engine (no
``wurk_django.server`` module, no cron parser, no admin views); the layout
test in tests/test_features.py holds that. So the ``install`` modules import
what a part needs inside that part's function, not at their top.

A part must not touch Redis or Django settings: a feature whose setting is
off decides that at run time (in its middleware or component), not at install
time.
"""

from __future__ import annotations

import importlib
import logging
import threading

logger = logging.getLogger("wurk_django")

CLIENT = "client"
DEATH = "death"
SERVER = "server"
ADMIN = "admin"
#: The parts of a feature, in the order :func:`install` with no part runs them.
PARTS: tuple[str, ...] = (CLIENT, DEATH, SERVER, ADMIN)

#: Packages under ``wurk_django`` that have an ``install`` module, with the parts it
#: installs (one ``install_<part>()`` function each). A process that needs one part
#: imports only the ``install`` modules that have it, so a pushing process never
#: loads, say, the periodic package. Order is irrelevant: positions in each
#: registry fix the order of execution.
BUILTIN: dict[str, tuple[str, ...]] = {
    "batch": (CLIENT, DEATH, SERVER, ADMIN),
    "unique": (CLIENT, DEATH, SERVER),
    "policies": (CLIENT, ADMIN),
    "encryption": (CLIENT, SERVER),
    "expiry": (SERVER,),
    "deadline": (SERVER,),
    "queue_limits": (SERVER,),
    "limiter": (SERVER, ADMIN),
    "statsd": (CLIENT, DEATH, SERVER),
    "otel": (CLIENT, SERVER),
    "history": (SERVER, ADMIN),
    "profiling": (SERVER, ADMIN),
    "leader": (SERVER,),
    "periodic": (SERVER, ADMIN),
    "workflow": (DEATH, SERVER, ADMIN),
    "results": (DEATH, SERVER, ADMIN),
    "celery": (CLIENT, SERVER),
    "http_api": (),  # no part: reached only through the URLs a project mounts
}

_lock = threading.RLock()
_installed: set[str] = set()
_installing: set[str] = set()


def install(part: str | None = None) -> None:
    """Install one part (``"client"``, ``"death"``, ``"server"`` or ``"admin"``) of every
    built-in feature once; with no part, all of them (idempotent, thread-safe).

    A part counts as installed only once every feature's is in: a thread that
    saw it early would build a chain without them (a push that skips the
    unique lock). Other threads wait on the lock meanwhile; the installing
    thread itself may come back here (an install reading a seam) and returns.
    """
    if part is None:
        for each in PARTS:
            install(each)
        return
    if part in _installed:
        return
    if part not in PARTS:
        raise ValueError(f"a feature part is one of {PARTS}, not {part!r}")
    if part == SERVER:
        # A worker pushes too (jobs that push jobs, batch callbacks fired where the
        # last job ended) and buries jobs: it gets the client and death parts first.
        install(CLIENT)
        install(DEATH)
    with _lock:
        if part in _installed or part in _installing:
            return
        _installing.add(part)
        try:
            for name, parts in BUILTIN.items():
                if part in parts:
                    module = importlib.import_module(f"wurk_django.{name}.install")
                    getattr(module, f"install_{part}")()
            _installed.add(part)
        finally:
            _installing.discard(part)
