"""Database hygiene around each job (CORE-116, RUN-848, DJ-042).

``close_old_connections()`` before and after every job honours
``CONN_MAX_AGE`` and ``CONN_HEALTH_CHECKS`` and drops connections that errored,
so a job never inherits a database connection that died while it waited.
"""

from __future__ import annotations

from django.conf import settings
from django.db import close_old_connections, connections, reset_queries


def before_job() -> None:
    if settings.DEBUG:
        reset_queries()
    close_old_connections()


def after_job() -> None:
    close_old_connections()


def close_thread_connections() -> None:
    """Connections are per thread: a processor closes its own when it exits."""
    connections.close_all()
