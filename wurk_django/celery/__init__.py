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
from .app import current_app
from .canvas import Signature, chain, chord, chunks, group, maybe_signature, signature, subtask, xmap, xstarmap
from .exceptions import MaxRetriesExceededError, Retry, TaskError, TaskRevokedError, TimeoutError
from .job import CeleryJob
from .request import Request
from .result import AsyncResult, GroupResult
from .task import Task, shared_task, task

__all__ = ["AsyncResult", "CeleryJob", "GroupResult", "MaxRetriesExceededError", "Request", "Retry", "Signature",
           "Task", "TaskError", "TaskRevokedError", "TimeoutError", "chain", "chord", "chunks", "current_app", "exceptions", "group",
           "maybe_signature", "schedules", "shared_task", "signals", "signature", "states", "subtask", "task", "xmap",
           "xstarmap"]
