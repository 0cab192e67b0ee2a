"""The one vocabulary of a result record's ``state``, and what each state is called by
the two APIs that read records: Celery's state names and ``django.tasks``'
``TaskResultStatus``.

Only :mod:`.record` writes states, and only these. A record written by an older
release may say ``dead``: it reads as :attr:`State.FAILED`.
"""

from __future__ import annotations

import enum


class State(enum.StrEnum):
    #: Pushed, waiting on its queue.
    ENQUEUED = "enqueued"
    #: Pushed for later (``countdown``/``eta``/``run_after``, or a rate limit put it back).
    SCHEDULED = "scheduled"
    #: A worker runs an attempt.
    RUNNING = "running"
    #: An attempt failed and another one is booked.
    RETRYING = "retrying"
    #: The worker stopped mid-run (or the job asked to resume later): it runs again.
    INTERRUPTED = "interrupted"
    #: It returned; ``return_value`` holds the value.
    COMPLETE = "complete"
    #: It ended for good without a value (retries used up, no retries, a kill, a death
    #: outside a run); ``errors`` holds why.
    FAILED = "failed"
    #: It will never run (revoked, or skipped past its ``expires``).
    REVOKED = "revoked"


#: States after which a record no longer changes (until a person retries the job by hand).
FINAL = frozenset({State.COMPLETE, State.FAILED, State.REVOKED})
#: States a record may be in while the job can still run.
OPEN = frozenset(State) - FINAL

#: Older records' names for a state.
_LEGACY = {"dead": State.FAILED}


def of(text: str | None) -> State | None:
    """The state a record's ``state`` field names; ``None`` for no record or an unknown word."""
    if not text:
        return None
    try:
        return State(text)
    except ValueError:
        return _LEGACY.get(text)


#: Celery's name of each state. No record (never written, expired, ``ignore_result``)
#: reads ``PENDING``, as in Celery.
CELERY: dict[State | None, str] = {
    None: "PENDING",
    State.ENQUEUED: "PENDING",
    State.SCHEDULED: "PENDING",
    State.INTERRUPTED: "PENDING",
    State.RUNNING: "STARTED",
    State.RETRYING: "RETRY",
    State.COMPLETE: "SUCCESS",
    State.FAILED: "FAILURE",
    State.REVOKED: "REVOKED",
}

#: The ``django.tasks`` ``TaskResultStatus`` member (by name) of each state. A task that
#: will never run is finished without a value: ``FAILED``, as Django has no other word.
TASKS: dict[State | None, str] = {
    None: "READY",
    State.ENQUEUED: "READY",
    State.SCHEDULED: "READY",
    State.INTERRUPTED: "READY",
    State.RETRYING: "READY",
    State.RUNNING: "RUNNING",
    State.COMPLETE: "SUCCESSFUL",
    State.FAILED: "FAILED",
    State.REVOKED: "FAILED",
}


def celery_name(text: str | None) -> str:
    return CELERY[of(text)]


def tasks_name(text: str | None) -> str:
    return TASKS[of(text)]
