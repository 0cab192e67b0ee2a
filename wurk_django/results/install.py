"""Plugs result records into the worker: the job observer that writes each attempt's
start and end (:func:`.record.observe`), the death handler that settles a job's
record wherever it dies (:func:`.record.died`), a ``job_retried`` receiver for a
retry booked outside the run's thread (:func:`.record.retried`), and a
``worker_exit`` receiver for runs a stop put back whose thread never came out
(:func:`.record.stopped`). Pushing processes need nothing: the
first record rides in the push's round trip, written by the producers (the Celery-style
tasks, the ``django.tasks`` backend) through :mod:`.record`.
"""

from __future__ import annotations

#: Observers are told in position order; the record's end is written before statsd's
#: counters (0), which never depend on it.
OBSERVER_POSITION = -10
#: Among the death handlers: after the batch (which records the death first) and unique
#: locks, so a reader that sees FAILURE finds the rest settled.
DEATH_POSITION = 50


def install_death() -> None:
    """Settle a job's record wherever it dies (a kill or revoke from the data API too)."""
    from .. import death
    from . import record

    death.register_handler("results", record.died, position=DEATH_POSITION)


def install_server() -> None:
    from .. import signals
    from ..server.run import observers
    from . import record

    observers.register("results", record.observe, position=OBSERVER_POSITION)
    # A retry booked by another thread than the run's (the watchdog): see record.retried.
    signals.job_retried.connect(record.retried, weak=False, dispatch_uid="wurk_django.results.retried")
    # A run the stop put back while its thread never came out of it: see record.stopped.
    signals.worker_exit.connect(record.stopped, weak=False, dispatch_uid="wurk_django.results.stopped")


def install_admin() -> None:
    """The job status page (``status/<jid>/``, no tab: the Busy page and job pages link to it)."""
    from django.utils.translation import gettext_lazy

    from ..admin_pages import Page, register

    register(Page("status", gettext_lazy("Job status"), "wurk_status", _urls, 27, tab=False))


def _urls(model_admin):
    from .admin import urls

    return urls(model_admin)
