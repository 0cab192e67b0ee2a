"""Job observers: code told when each job starts and how it ended, without wrapping it.

A server middleware wraps a job: a layer of calls on every job, a frame that
stays on the stack while it runs. A feature that only counts and times jobs
(statsd) needs none of that, and on jobs of a few microseconds the layer is a
good part of the cost. Such a feature registers an observer here instead:

* ``observer(job, queue)`` is called by the processor as the job starts (its
  payload parsed, before the middleware chain), and returns ``None`` (nothing
  to say about this job) or a callable ``end(outcome, error, elapsed_ms)``;
* the settlement (:mod:`.settle`) calls that ``end`` once the run is over, before
  the outcome is booked, whoever settles it (the job's thread, or the watchdog for
  a thread it abandoned at a hard time limit): ``outcome`` is the run's :class:`~wurk_django.outcome.Outcome`
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

from ...positioned import Positioned

Ending = Callable[[Any, "BaseException | None", float], None]
Observer = Callable[[dict, str], "Ending | None"]


_registered: Positioned[Observer] = Positioned()
#: The observers in position order: what the processor reads on every job.
active: tuple[Observer, ...] = ()


def register(name: str, observer: Observer, position: int = 0) -> None:
    """Add (or replace, by ``name``) a job observer; lower positions are told first."""
    global active
    _registered.add(name, observer, position)
    active = tuple(_registered.ordered)


def unregister(name: str) -> None:
    global active
    _registered.remove(name)
    active = tuple(_registered.ordered)


# -- settled hooks ------------------------------------------------------------------
#
# Told once per run, after its outcome is booked and before the job is acknowledged,
# whoever settled it (the job's thread, or the watchdog for a thread it abandoned):
# ``hook(ctx, outcome, error)`` with the job's context, the final Outcome (RETRIED,
# DEAD, DISCARDED, SUCCEEDED, PAUSED, RESCHEDULED, INTERRUPTED, GIVEN_BACK) and the
# error the run failed with (None otherwise). What a hook writes comes from the
# settled outcome, never from a thread that came back late.

Settled = Callable[[Any, Any, "BaseException | None"], None]

_settled_registered: Positioned[Settled] = Positioned()
#: The settled hooks in position order: what the settlement reads on every job.
settled_hooks: tuple[Settled, ...] = ()


def on_settled(name: str, hook: Settled, position: int = 0) -> None:
    """Add (or replace, by ``name``) a hook told each run's final outcome once."""
    global settled_hooks
    _settled_registered.add(name, hook, position)
    settled_hooks = tuple(_settled_registered.ordered)


def off_settled(name: str) -> None:
    global settled_hooks
    _settled_registered.remove(name)
    settled_hooks = tuple(_settled_registered.ordered)


def settled(ctx: Any, outcome: Any, error: BaseException | None) -> None:
    """Tell every settled hook; one that raises is reported, the others are still told."""
    for hook in settled_hooks:
        try:
            hook(ctx, outcome, error)
        except Exception as exc:
            from ...reporting import report

            report(exc, {"context": "settled hook", "jid": (ctx.job or {}).get("jid")}, ctx.config)
