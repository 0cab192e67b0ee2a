"""gunicorn server hooks for embedded mode (DJ-061, RUN-845, RUN-846).

Import them into ``gunicorn.conf.py``::

    from wurk_django.gunicorn import post_fork, post_worker_init, pre_fork, worker_abort, worker_exit, worker_int

With ``WURK["MODE"] = "embedded"`` every gunicorn worker process then runs one
embedded wurk worker, with or without ``--preload``, and the master runs none.
In any other mode the hooks do nothing, so one config file serves both setups.

Where each hook runs, and why it does what it does:

* ``pre_fork`` — master, before each fork: close the master's DB and Redis
  connections so no worker inherits a socket it would share with its siblings
  (they exist only when ``--preload`` ran code that used them).
* ``post_fork`` — worker, just forked: forget inherited connections without
  closing them (closing would shut the master's socket too).
* ``post_worker_init`` — worker, app loaded: start embedded wurk. This is the
  first point where both the fork has happened and Django is set up.
* ``worker_int`` — worker, SIGINT/SIGQUIT (gunicorn's quick shutdown): requeue
  running jobs at once instead of draining.
* ``worker_abort`` — worker, SIGABRT after a gunicorn ``timeout``: only logs;
  the reliable fetcher's private lists hand the running jobs back.
* ``worker_exit`` — worker, as it exits (TERM, ``max_requests`` recycling,
  reload): quiet and drain within ``min(WURK["TIMEOUT"], graceful_timeout - 5)``.

gunicorn owns the worker's signals; wurk installs no handler (RUN-846).
"""

from __future__ import annotations

import logging
from typing import Any

from .. import context
from ..redis import connection
from . import boot, embedded

logger = logging.getLogger("wurk_django.embedded")

#: Seconds kept free between the end of the drain and gunicorn's SIGKILL (RUN-846).
KILL_MARGIN = 5.0


def drain_budget(wurk_timeout: float, graceful_timeout: float, worker_timeout: float = 0) -> float:
    """What a worker may spend draining jobs before gunicorn kills it: never negative.

    gunicorn SIGKILLs a worker ``graceful_timeout`` seconds after a TERM, and a
    worker that stops notifying it for ``timeout`` seconds (0 disables that) while
    the master keeps running, as in ``max_requests`` recycling. The requeue and
    deregistration after the drain need the last few seconds.
    """
    limits = [float(graceful_timeout)]
    if worker_timeout:
        limits.append(float(worker_timeout))
    return max(0.0, min(float(wurk_timeout), min(limits) - KILL_MARGIN))


def _django_ready() -> bool:
    try:
        from django.apps import apps
    except ImportError:
        return False
    return apps.ready


def pre_fork(server: Any, worker: Any) -> None:
    """Master, before each fork: close the connections a preloaded app may have opened."""
    if not _django_ready():
        return  # without --preload the master never loaded Django: nothing is open
    from django.db import connections

    connections.close_all()
    connection.reset()


def post_fork(server: Any, worker: Any) -> None:
    """Worker, just forked: drop the DB connection objects inherited from the master, unclosed.

    Redis pools are already forgotten by an at-fork hook in :mod:`wurk_django.redis.connection`.
    """
    if not _django_ready():
        return
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        # Closing would send a goodbye on the socket the master still owns.
        conn.connection = None


def post_worker_init(worker: Any) -> None:
    """Worker, app loaded: start the embedded worker (a no-op unless ``WURK["MODE"]`` is "embedded")."""
    if not _django_ready():
        logger.warning("wurk: the gunicorn app did not set Django up; embedded wurk not started")
        return
    if not boot.current().embedded:
        boot.start("gunicorn post_worker_init")  # logs a refusal for modes that cannot run here
        return

    cfg = worker.cfg
    wurk_timeout = context.config().timeout
    budget = drain_budget(wurk_timeout, cfg.graceful_timeout, cfg.timeout)
    if budget < wurk_timeout:
        logger.warning("wurk: TIMEOUT %ss + %ss does not fit gunicorn's graceful_timeout %ss / timeout %ss: "
                       "running jobs get %ss to finish at shutdown, then go back to their queue",
                       wurk_timeout, KILL_MARGIN, cfg.graceful_timeout, cfg.timeout, budget)
    boot.start("gunicorn post_worker_init", drain_timeout=budget)


def worker_int(worker: Any) -> None:
    """Worker, SIGINT/SIGQUIT: gunicorn exits at once, so requeue running jobs now rather than drain."""
    embedded.stop(timeout=0)


def worker_abort(worker: Any) -> None:
    """Worker, SIGABRT (gunicorn ``timeout``): nothing to do; reliable fetch brings its jobs back."""
    if embedded.attempted():
        logger.warning("wurk: gunicorn aborted worker %s; its running jobs return through reliable fetch",
                       getattr(worker, "pid", "?"))


def worker_exit(server: Any, worker: Any) -> None:
    """Worker exiting: quiet, drain, requeue the rest, deregister (also harmless in the master)."""
    embedded.stop()
