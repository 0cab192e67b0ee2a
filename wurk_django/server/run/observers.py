"""Job observers: code told when each job starts and how it ended, without wrapping it.

A server middleware wraps a job: a layer of calls on every job, a frame that
stays on the stack while it runs. A feature that only counts and times jobs
(statsd) needs none of that, and on jobs of a few microseconds the layer is a
good part of the cost. Such a feature registers an observer here instead:

* ``observer(job, queue)`` is called by the processor as the job starts (its
  payload parsed, before the middleware chain), and returns ``None`` (nothing
  to say about this job) or a callable ``end(outcome, error, elapsed_ms)``;
* the processor calls that ``end`` once the run is over, before the outcome is
  booked: ``outcome`` is the run's :class:`~wurk_django.outcome.Outcome`
  (``FAILED`` for a failure, whatever the retry layer then makes of it),
  ``error`` the exception or ``None``, ``elapsed_ms`` the run's duration,
  middleware included.

Observers must not raise (an error is reported and the job goes on) and must
be cheap: they run on the job's thread. With none registered a job pays one
attribute read.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Ending = Callable[[Any, "BaseException | None", float], None]
Observer = Callable[[dict, str], "Ending | None"]

_registered: dict[str, tuple[int, Observer]] = {}
#: The observers in position order: what the processor reads on every job.
active: tuple[Observer, ...] = ()


def register(name: str, observer: Observer, position: int = 0) -> None:
    """Add (or replace, by ``name``) a job observer; lower positions are told first."""
    global active
    _registered[name] = (position, observer)
    active = tuple(fn for _pos, fn in sorted(_registered.values(), key=lambda entry: entry[0]))


def unregister(name: str) -> None:
    global active
    _registered.pop(name, None)
    active = tuple(fn for _pos, fn in sorted(_registered.values(), key=lambda entry: entry[0]))
