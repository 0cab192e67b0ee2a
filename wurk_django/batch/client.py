"""The batch's client middleware: what a pushing process loads of batches.

Apart from the server middleware (:mod:`wurk_django.batch.middleware`), which
imports the worker engine, so a web process that pushes into a batch never does.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import context


class BatchClientMiddleware:
    """Stamps the open batch's bid on every job pushed inside ``jobs()``."""

    @staticmethod
    def applies(job: dict) -> bool:
        return context.current_batch.get() is not None

    def __call__(self, job_class: Any, job: dict, queue: str, redis: Any, call_next: Callable[[], Any]) -> Any:
        batch = context.current_batch.get()
        if batch is not None and not job.get("bid"):
            job["bid"] = batch.bid
        return call_next()
