"""``get_task_logger``: Celery's per-task logger, on Python's logging.

::

    # before: from celery.utils.log import get_task_logger
    from wurk_django.celery.utils.log import get_task_logger

    logger = get_task_logger(__name__)

The logger is ``logging.getLogger(name)``, configured by Django's ``LOGGING`` like any
other; each of its records carries ``task_id`` and ``task_name`` (``"???"`` outside a
task, as in Celery), so a format with ``%(task_id)s`` works.
"""

from __future__ import annotations

import logging


class TaskFilter(logging.Filter):
    """Adds the running task's ``task_id`` and ``task_name`` to each record."""

    def filter(self, record: logging.LogRecord) -> bool:
        from ..job import running

        current = running.get()
        payload = (current.payload or {}) if current is not None else {}
        record.task_id = payload.get("jid") or "???"
        record.task_name = payload.get("class") or "???"
        return True


_FILTER = TaskFilter()


def get_task_logger(name: str) -> logging.Logger:
    """The logger ``name``, its records tagged with the running task's id and name."""
    logger = logging.getLogger(name)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return logger


def get_logger(name: str) -> logging.Logger:
    """Celery's ``get_logger``: the plain logger ``name``."""
    return logging.getLogger(name)
