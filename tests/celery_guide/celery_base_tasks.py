"""The user guide's task with a custom base class (``base=``), in a module of its own: where a
definition is refused, only the examples that import it see the refusal."""

from __future__ import annotations

from celery import Task, shared_task

from tests.celery_guide import celery_app  # noqa: F401 - celery only
from tests.celery_guide.celery_tasks import store


class Recorded(Task):
    """The guide's custom base class: handlers that leave a mark."""

    def on_success(self, retval, task_id, args, kwargs):
        store().rpush("guide:handlers", f"success:{retval}")

    def on_failure(self, exc, task_id, args, kwargs, einfo):
        store().rpush("guide:handlers", f"failure:{type(exc).__name__}")


@shared_task(base=Recorded)
def recorded(x, fail=False):
    if fail:
        raise ValueError("asked to fail")
    return x * 10


@shared_task(bind=True, base=Recorded)
def recorded_bound(self, x):
    return f"{self.name.rpartition('.')[2]}:{x}"
