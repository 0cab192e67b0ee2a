# ruff: noqa: N999 -- gunicorn looks for this file name
"""gunicorn config for the example project with wurk embedded in every web worker.

    gunicorn -c example_project/gunicorn.conf.py

with ``WURK["MODE"] = "embedded"`` in the settings (the example settings leave
it "off", and the hooks then do nothing). Each of the ``workers`` processes runs
``WURK["EMBEDDED_CONCURRENCY"]`` job threads (2 by default), so this config
works jobs on 2 × 2 threads. The master runs none, with or without ``--preload``.
"""

import os

# The wurk hooks; gunicorn finds them by name in this module.
from wurk_django.gunicorn import (  # noqa: F401
    post_fork,
    post_worker_init,
    pre_fork,
    worker_abort,
    worker_exit,
    worker_int,
)

wsgi_app = "example_project.wsgi:application"
bind = os.environ.get("GUNICORN_BIND", "127.0.0.1:8000")
workers = int(os.environ.get("GUNICORN_WORKERS", "2"))

# On TERM gunicorn waits graceful_timeout before it SIGKILLs a worker. wurk drains
# within min(WURK["TIMEOUT"], graceful_timeout - 5): keep TIMEOUT + 5 <= both values
# below, or long jobs are requeued (never lost) instead of finishing.
graceful_timeout = 30
timeout = 30

# Recycling a worker drains its embedded wurk through worker_exit, like a TERM.
max_requests = 0
