"""The user guide's task logger."""

from __future__ import annotations

from celery import shared_task
from celery.utils.log import get_task_logger

from tests.celery_guide import celery_app  # noqa: F401 - celery only

logger = get_task_logger(__name__)


@shared_task
def logged(x, y):
    logger.info("Adding %s + %s", x, y)
    return x + y
