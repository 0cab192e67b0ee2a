"""Celery-style tasks on wurk jobs: ``@shared_task``, ``delay``/``apply_async``,
``self.retry()`` and ``AsyncResult``, so a Celery codebase moves over with few edits.

::

    # before: from celery import shared_task
    from wurk_django.celery import shared_task

It is a thin layer: each task is a :class:`~wurk_django.job.Job` class, its calls are
Sidekiq-format jobs (keyword arguments in the payload's ``kwargs``), run by
``manage.py wurk`` with the normal retry layer, dead set and admin. Results live in
``status:<jid>`` hashes kept by the results feature (:mod:`wurk_django.results`). See
docs/from-celery.md.
"""

from . import exceptions, schedules, signals, states
from .exceptions import MaxRetriesExceededError, Retry, TaskError, TaskRevokedError, TimeoutError
from .job import CeleryJob
from .request import Request
from .result import AsyncResult
from .task import Task, shared_task, task

__all__ = ["AsyncResult", "CeleryJob", "exceptions", "schedules", "signals", "MaxRetriesExceededError", "Request", "Retry", "Task", "TaskError",
           "TaskRevokedError", "TimeoutError", "shared_task", "states", "task"]
