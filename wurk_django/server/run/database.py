"""Database hygiene around each job (CORE-116, RUN-848, DJ-042).

``close_old_connections()`` before and after every job honours
``CONN_MAX_AGE`` and ``CONN_HEALTH_CHECKS`` and drops connections that errored,
so a job never inherits a database connection that died while it waited.

Both calls are skipped in a thread that holds no open connection: there is
nothing for them to check, and on a job that never touches the database they
were a measurable part of the per-job cost (RUN-706). A thread is marked when
Django opens a connection in it (``connection_created`` is sent synchronously,
in the connecting thread) and unmarked once the guard finds every one of its
connections closed, which is after each job under the default ``CONN_MAX_AGE = 0``.
"""

from __future__ import annotations

import threading
from typing import Any

from django.conf import settings
from django.db import close_old_connections, connections, reset_queries
from django.db.backends.signals import connection_created


class _Marks(threading.local):
    # The class default lets an unmarked thread read False as a plain attribute: the
    # getattr(local, "open", False) it replaces raised and caught an AttributeError inside,
    # 0.5-1 us on each of two or three reads a job (bench/micro.py).
    open = False


_threads = _Marks()


def _opened_here(sender: Any, **kwargs: Any) -> None:
    _threads.open = True


connection_created.connect(_opened_here, weak=False, dispatch_uid="wurk_django.server.run.database")


def before_job() -> None:
    if _threads.open:
        if settings.DEBUG:
            reset_queries()  # each job's connection.queries starts empty
        close_old_connections()


def after_job() -> None:
    if _threads.open:
        close_old_connections()
        if all(conn.connection is None for conn in connections.all(initialized_only=True)):
            if settings.DEBUG:
                reset_queries()  # before_job skips unmarked threads: clear this job's log now
            _threads.open = False


def close_thread_connections() -> None:
    """Connections are per thread: a processor closes its own when it exits."""
    if settings.configured:  # a worker built from a Config alone has no databases to close
        connections.close_all()
    _threads.open = False
