"""The values of the one push door: a job being planned, a planned job, and its companions.

Every push (``perform_async`` and friends, ``aenqueue``, a push deferred to a
transaction's commit, ``perform_inline``, a batch's callbacks, a workflow's steps)
is planned by :meth:`wurk_django.client.push.Client.plan` in two halves:

* :meth:`~wurk_django.client.push.Client.prepare`: validate the item, pick its
  Redis, normalize it (class options, jid, ``created_at``, option checks). No I/O,
  so a caller may prepare at the call site and finish later (at a commit);
* :meth:`~wurk_django.client.push.Client.finish`: the client middleware, then the
  argument check. What it returns is a :class:`Planned` job: the payload as it will
  be written (a sealed argument is sealed, a unique lock is taken) and its typed
  operations.

Only then is anything written, by the writer (one round trip with the companions'
commands) or, for a batch's callbacks and a workflow's steps, by a Lua script that
moves those planned bytes and never makes a payload of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import payload
from . import operations
from .operations import Command, Operation

if TYPE_CHECKING:
    from ..conf import Config


@dataclass(frozen=True, slots=True)
class Companions:
    """What a push carries beside its job, for a feature that needs more than the job.

    * ``commands(job)``: commands written in the push's own round trip, before the job
      (a result record, so no reader sees a pushed task without one);
    * ``front``: push it at the end workers take from next (``RPUSH``), a bool or a
      function of the planned job;
    * ``in_process(job)``: run instead of ``commands`` when a testing mode keeps the
      job in this process (the record lives in memory then).

    Each function is given the planned job (its final jid and options).
    """

    commands: Callable[[dict], Sequence[Command]] | None = None
    front: bool | Callable[[dict], bool] = False
    in_process: Callable[[dict], None] | None = None

    def commands_for(self, job: dict) -> list[Command]:
        return list(self.commands(job)) if self.commands is not None else []

    def front_for(self, job: dict) -> bool:
        return self.front(job) if callable(self.front) else bool(self.front)


#: A push with nothing beside it (almost every push).
NONE = Companions()


@dataclass(slots=True)
class Prepared:
    """A job validated and normalized, not yet through the middleware (see :meth:`Client.finish`)."""

    job: dict
    #: The Redis it goes to (its shard's config), when known before the middleware; else the client's.
    target: Config
    companions: Companions = NONE


@dataclass(slots=True)
class Planned:
    """A job through the whole door: the payload exactly as it will be stored."""

    job: dict
    target: Config
    companions: Companions = NONE
    _extra: list[Command] | None = field(default=None, repr=False)

    @property
    def jid(self) -> str:
        return self.job["jid"]

    @property
    def queue(self) -> str:
        return self.job["queue"]

    @property
    def front(self) -> bool:
        return self.companions.front_for(self.job)

    @property
    def extra(self) -> list[Command]:
        """The companions' commands for this job (made once)."""
        if self._extra is None:
            self._extra = self.companions.commands_for(self.job)
        return self._extra

    def raw(self, **stamp: Any) -> bytes:
        """The payload's bytes, with ``stamp`` fields set (``enqueued_at`` for a script's
        push); the job dict itself is left as it is."""
        return payload.dumps({**self.job, **stamp} if stamp else self.job)

    def operations(self, now_ms: int | None = None) -> list[Operation]:
        """The typed operations that write it: the companions' commands, then its
        ``Enqueue`` or ``Schedule`` (``enqueued_at`` stamped now)."""
        ops = operations.for_jobs([self.job], front=self.front, now_ms=now_ms, wire=self.target.wire_format)
        return [*(operations.Extra(c) for c in self.extra), *ops]
