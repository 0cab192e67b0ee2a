"""Celery 5.4's ``DjangoTask``: tasks with ``delay_on_commit`` / ``apply_async_on_commit``.

Every ``@shared_task`` here already has both (:class:`wurk_django.celery.Task`), so
``DjangoTask`` is that class: ``@shared_task(base=DjangoTask)`` is accepted as it is.
"""

from __future__ import annotations

from ...task import Task as DjangoTask

__all__ = ["DjangoTask"]
