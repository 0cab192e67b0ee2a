"""Celery's task state names (Celery 5's ``celery.states``), read from wurk's result
records (``status:<jid>``, whose one vocabulary is :mod:`wurk_django.results.states`).

``RECEIVED``, ``REJECTED`` and ``IGNORED`` exist for code that compares against them; a
wurk record never reads them (a job is taken and started in one step, never rejected).
"""

from __future__ import annotations

from ..results.states import CELERY

PENDING = "PENDING"
RECEIVED = "RECEIVED"
STARTED = "STARTED"
SUCCESS = "SUCCESS"
FAILURE = "FAILURE"
REVOKED = "REVOKED"
REJECTED = "REJECTED"
RETRY = "RETRY"
IGNORED = "IGNORED"

#: States after which a task's result no longer changes.
READY_STATES = frozenset({SUCCESS, FAILURE, REVOKED})
UNREADY_STATES = frozenset({PENDING, RECEIVED, STARTED, REJECTED, RETRY})
EXCEPTION_STATES = frozenset({RETRY, FAILURE, REVOKED})
PROPAGATE_STATES = frozenset({FAILURE, REVOKED})
ALL_STATES = frozenset({PENDING, RECEIVED, STARTED, SUCCESS, FAILURE, RETRY, REVOKED})

#: Celery's order of states, most final first; an unknown (custom) state sits before PENDING.
PRECEDENCE = [SUCCESS, FAILURE, None, REVOKED, STARTED, RECEIVED, REJECTED, RETRY, PENDING]
PRECEDENCE_LOOKUP = dict(zip(PRECEDENCE, range(len(PRECEDENCE)), strict=True))
NONE_PRECEDENCE = PRECEDENCE_LOOKUP[None]


def precedence(state: str | None) -> int:
    """The index of ``state`` in :data:`PRECEDENCE` (a custom state counts as ``None``)."""
    return PRECEDENCE_LOOKUP.get(state, NONE_PRECEDENCE)


class state(str):  # noqa: N801 - Celery's name
    """A state name that compares by :func:`precedence`: ``state(PENDING) < state(SUCCESS)``."""

    def __gt__(self, other: object) -> bool:
        return precedence(self) < precedence(str(other))

    def __ge__(self, other: object) -> bool:
        return precedence(self) <= precedence(str(other))

    def __lt__(self, other: object) -> bool:
        return precedence(self) > precedence(str(other))

    def __le__(self, other: object) -> bool:
        return precedence(self) >= precedence(str(other))


#: A record's state as Celery names it (a missing record reads ``PENDING``, as in Celery).
OF_RECORD = {str(state): name for state, name in CELERY.items() if state is not None} | {"dead": FAILURE}
