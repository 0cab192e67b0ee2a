"""gunicorn server hooks for embedded mode; the public import path of :mod:`wurk_django.embed.gunicorn`.

In ``gunicorn.conf.py``::

    from wurk_django.gunicorn import post_fork, post_worker_init, pre_fork, worker_abort, worker_exit, worker_int
"""

from .embed.gunicorn import (
    KILL_MARGIN,
    drain_budget,
    post_fork,
    post_worker_init,
    pre_fork,
    worker_abort,
    worker_exit,
    worker_int,
)

__all__ = ["KILL_MARGIN", "drain_budget", "post_fork", "post_worker_init", "pre_fork", "worker_abort",
           "worker_exit", "worker_int"]
