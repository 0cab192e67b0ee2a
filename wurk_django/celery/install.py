"""Plugs the Celery-style tasks into the worker: a task found past its ``expires`` is
skipped by the expiry feature, and its result then reads ``REVOKED``, as Celery's does.

Everything else a task needs on a worker is on its job class (:class:`.job.CeleryJob`:
``retry_in`` and ``retry_limit`` for the retry layer, ``result_error`` for the record)
or in the results feature (:mod:`wurk_django.results`), which writes the records.
"""

from __future__ import annotations


def install_server() -> None:
    from .. import signals
    from ..results import record

    # Only a job pushed with a result record (``result_ttl``) is touched; the signal is
    # sent only for jobs skipped as expired, so ordinary jobs pay nothing for it.
    signals.job_expired.connect(record.expired, weak=False, dispatch_uid="wurk_django.celery.expired")
    # The canvas's own tasks (celery.map, celery.starmap) are known to every worker by name.
    from . import canvas  # noqa: F401

    install_errbacks()


def install_errbacks() -> None:
    """Call a dead call's ``link_error`` errbacks (see :mod:`.errbacks`), on a worker."""
    from .. import death
    from .errbacks import on_death

    # After the results feature (50): an errback reading the call's result sees FAILURE.
    death.register_handler("celery-errbacks", on_death, position=60)
