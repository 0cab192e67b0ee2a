"""Plugs the Celery-style tasks into the worker and the push path.

* a task found past its ``expires`` is skipped by the expiry feature: its result then
  reads ``REVOKED`` and ``task_revoked`` is sent, as Celery does;
* Celery's worker signals (:mod:`.signals`) follow wurk's lifecycle: ``worker_process_init``
  and ``worker_ready`` once the processors fetch (a launcher component), ``worker_shutdown``
  with wurk's ``worker_shutdown``;
* ``CELERY_BEAT_SCHEDULE`` entries become periodic loops (:mod:`.beat`);
* on the push side, ``before_task_publish`` / ``after_task_publish`` come from a client
  middleware that only a push of a Celery task with a receiver listening pays for.

Everything else a task needs on a worker is on its job class (:class:`.job.CeleryJob`:
``retry_in`` and ``retry_limit`` for the retry layer, ``result_error`` for the record)
or in the results feature (:mod:`wurk_django.results`), which writes the records.
"""

from __future__ import annotations

from typing import Any

#: Innermost but for encryption (+50): receivers see the body as it is pushed, in plain text.
PUBLISH_POSITION = 40
#: After periodic jobs (20): the worker is fetching and its loops are registered.
READY_POSITION = 60


class _Ready:
    """The launcher component that tells Celery's ``worker_ready`` receivers the worker runs."""

    def __init__(self, launcher: Any) -> None:
        self.launcher = launcher

    def start(self) -> None:
        from . import signals

        signals.worker_process_init.send(sender=None)
        signals.worker_ready.send(sender=self.launcher)

    def stop(self) -> None:
        pass


def _shutdown(sender: Any, launcher: Any = None, **kwargs: Any) -> None:
    from . import signals

    signals.worker_shutdown.send(sender=launcher)


def _revoked(sender: Any, job: dict, **kwargs: Any) -> None:
    from ..registry import registered
    from . import signals
    from .job import CeleryJob
    from .request import Request

    if not signals.task_revoked.receivers:
        return
    job_class = registered().get(str(job.get("class")))
    if isinstance(job_class, type) and issubclass(job_class, CeleryJob):
        signals.task_revoked.send(sender=job_class.task_object(), request=Request.from_payload(job, is_eager=False),
                                  terminated=False, signum=None, expired=True)


def install_client() -> None:
    from .. import middleware
    from .publishing import PublishSignals

    middleware.register("client", "celery_publish", PublishSignals, position=PUBLISH_POSITION)


def install_server() -> None:
    from .. import signals
    from ..results import record
    from ..server.launcher import register_component
    from . import beat

    # Only a job pushed with a result record (``result_ttl``) is touched; the signal is
    # sent only for jobs skipped as expired, so ordinary jobs pay nothing for it.
    signals.job_expired.connect(record.expired, weak=False, dispatch_uid="wurk_django.celery.expired")
    signals.job_expired.connect(_revoked, weak=False, dispatch_uid="wurk_django.celery.revoked")
    signals.worker_shutdown.connect(_shutdown, weak=False, dispatch_uid="wurk_django.celery.shutdown")
    register_component("celery_ready", _Ready, position=READY_POSITION)
    # The canvas's own tasks (celery.map, celery.starmap) are known to every worker by name.
    from . import canvas  # noqa: F401

    install_errbacks()
    beat.register_schedule()


def install_errbacks() -> None:
    """Call a dead call's ``link_error`` errbacks (see :mod:`.errbacks`), on a worker."""
    from .. import death
    from .errbacks import on_death

    # After the results feature (50): an errback reading the call's result sees FAILURE.
    death.register_handler("celery-errbacks", on_death, position=60)
