"""Celery's task state names, read from wurk's result records (``status:<jid>``, whose
one vocabulary is :mod:`wurk_django.results.states`)."""

from __future__ import annotations

from ..results.states import CELERY

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

#: A record's state as Celery names it (a missing record reads ``PENDING``, as in Celery).
OF_RECORD = {str(state): name for state, name in CELERY.items() if state is not None} | {"dead": FAILURE}
