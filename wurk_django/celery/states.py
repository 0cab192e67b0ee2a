"""Celery's task state names, read from wurk's result records (``status:<jid>``)."""

from __future__ import annotations

PENDING = "PENDING"
STARTED = "STARTED"
RETRY = "RETRY"
SUCCESS = "SUCCESS"
FAILURE = "FAILURE"
REVOKED = "REVOKED"

#: States after which a task's result no longer changes.
READY_STATES = frozenset({SUCCESS, FAILURE, REVOKED})
EXCEPTION_STATES = frozenset({RETRY, FAILURE, REVOKED})
ALL_STATES = frozenset({PENDING, STARTED, RETRY, SUCCESS, FAILURE, REVOKED})

#: wurk's record states (:mod:`wurk_django.result_store`) as Celery names them. A record
#: that is missing (never written, expired, or ``ignore_result``) reads ``PENDING``, as in Celery.
OF_RECORD = {
    "enqueued": PENDING,
    "scheduled": PENDING,
    "interrupted": PENDING,  # the worker stopped mid-run: the job is back on its queue
    "running": STARTED,
    "retrying": RETRY,
    "complete": SUCCESS,
    "failed": FAILURE,
    "dead": FAILURE,
    "revoked": REVOKED,
}
