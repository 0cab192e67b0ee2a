"""``before_task_publish`` / ``after_task_publish``: a client middleware around each push
of a Celery task, sent with Celery's keyword arguments (see :mod:`.signals`)."""

from __future__ import annotations

from typing import Any

from . import signals


class PublishSignals:
    """Sends Celery's publish signals around the push of a Celery task. A receiver of
    ``before_task_publish`` may change ``headers``: they travel in the payload's
    ``headers`` and the task reads them as ``self.request.headers``."""

    @staticmethod
    def applies(job: dict) -> bool:
        return bool(signals.before_task_publish.receivers or signals.after_task_publish.receivers)

    def __call__(self, job_class: Any, job: dict, queue: str, redis: Any, call_next: Any) -> Any:
        from .job import CeleryJob

        name = job.get("class")
        if isinstance(job_class, str):
            from ..registry import registered

            job_class = registered().get(job_class)
        job_class = getattr(job_class, "job_class", job_class)  # a @shared_task object: its class
        if not (isinstance(job_class, type) and issubclass(job_class, CeleryJob)):
            return call_next()
        # Celery's message headers always name the call and the task; the others are the caller's.
        given = {"id": job.get("jid"), "task": name}
        headers = {**given, **(job.get("headers") or {})}
        delivery = {"exchange": "", "routing_key": queue}
        signals.before_task_publish.send(sender=name, body=job, headers=headers, properties={}, declare=[],
                                         retry_policy=None, **delivery)
        custom = {k: v for k, v in headers.items() if k not in given or v != given[k]}
        if custom:
            job["headers"] = custom
        result = call_next()
        if result:
            signals.after_task_publish.send(sender=name, body=job, headers=headers, **delivery)
        return result
