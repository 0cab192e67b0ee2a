"""What a worker warns about once at boot: set-ups that run but quietly go wrong.

* Job classes, periodic entries and batch callbacks whose queue this worker does
  not serve: their jobs wait, silently, until some worker is started with that
  queue (a newcomer's ``manage.py wurk`` serves only ``default``).
* SQLite with more than one thread: SQLite takes one writer at a time, so jobs
  that write at once fail with ``database is locked`` and pile up as retries.

Each is one log line at WARNING; nothing here stops the worker.
"""

from __future__ import annotations

import logging
import shlex
from collections import defaultdict
from typing import Any

logger = logging.getLogger("wurk_django.worker")

#: A batch's callbacks go to this queue unless the batch names another.
BATCH_CALLBACK_QUEUE = "default"


def unserved_queues(config: Any) -> dict[str, list[str]]:
    """``{queue: [what pushes there]}`` for every queue the registered job classes,
    the periodic entries and batch callbacks use that ``config`` does not serve."""
    from .. import registry

    served = set(config.queue_names)
    users: dict[str, list[str]] = defaultdict(list)
    default_queue = config.default_job_options.get("queue", "default")
    seen: set[type] = set()
    for name, job_class in sorted(registry.registered().items()):
        if job_class in seen or getattr(job_class, "job_name", name) != name:
            continue  # a class registered under two names is listed once, by its own name
        seen.add(job_class)
        queue = job_class.get_options().get("queue") or default_queue
        users[queue].append(name)
    for entry in config.periodic or ():
        queue = _periodic_queue(entry, default_queue)
        if queue:
            users[queue].append(f"periodic {entry.get('job')}")
    users[BATCH_CALLBACK_QUEUE].append("batch callbacks (unless a batch sets callback_queue)")
    return {queue: names for queue, names in sorted(users.items()) if queue not in served}


def _periodic_queue(entry: Any, default_queue: str) -> str | None:
    if not isinstance(entry, dict):
        return None  # malformed: manage.py check reports it
    if entry.get("queue"):
        return str(entry["queue"])
    from .. import registry

    try:
        return registry.resolve(str(entry.get("job"))).get_options().get("queue") or default_queue
    except Exception:
        return None  # an unknown class: manage.py check reports it


def sqlite_databases() -> list[str]:
    """Aliases of the configured databases that are SQLite."""
    from django.conf import settings

    if not settings.configured:
        return []
    return [alias for alias, db in getattr(settings, "DATABASES", {}).items()
            if "sqlite" in str(db.get("ENGINE", ""))]


def log_all(config: Any) -> None:
    """Log each boot warning that applies to ``config``."""
    unserved = unserved_queues(config)
    if unserved:
        listed = "; ".join(f"{queue!r}: {', '.join(names[:5])}{' ...' if len(names) > 5 else ''}"
                           for queue, names in unserved.items())
        # Quoted as a shell would need them: a queue name may hold spaces or quotes.
        flags = " ".join(f"-q {shlex.quote(q)}" for q in config.queue_names)
        logger.warning("this worker serves only %s; jobs for these queues will wait for another worker: %s "
                       "(add -q NAME, or WURK['QUEUES'])", flags, listed)
    sqlite = sqlite_databases()
    if sqlite and config.concurrency > 1:
        logger.warning("database %s is SQLite, which lets one thread write at a time: with %d threads, jobs "
                       "that write at once fail with 'database is locked'. Run workers with -c 1, or use "
                       "PostgreSQL or MySQL (docs/django.md, 'Databases and workers')",
                       ", ".join(repr(a) for a in sqlite), config.concurrency)
