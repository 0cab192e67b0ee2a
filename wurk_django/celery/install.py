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
