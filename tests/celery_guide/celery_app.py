"""The real Celery app the user-guide examples run on first: broker and result backend are
the test Redis database (WURK_TEST_REDIS_URL), the worker is ``celery -A`` this module."""

from __future__ import annotations

import os

from celery import Celery

REDIS_URL = os.environ.get("WURK_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")

app = Celery("guide", broker=REDIS_URL, backend=REDIS_URL, include=[f"tests.celery_guide.celery_{m}" for m in ("tasks", "base_tasks", "limit_tasks", "logging_tasks", "signal_tasks", "rate_tasks")])
app.conf.update(
    # The examples' queues: the default one and the one the routing example names.
    task_default_queue="default",
    task_queues=None,
    result_extended=True,  # AsyncResult.name/.args/.kwargs, as the results examples read them
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
    worker_hijack_root_logger=False,
)
app.set_default()
