"""Push policies (issue 47 item 3): debounce and throttle, beside unique jobs.

A job class declares at most one push policy, checked when the class is defined:

* ``unique_for = N`` (:mod:`wurk_django.unique`): a push while an identical job is
  pending is dropped;
* ``debounce_for = N`` (with ``debounce_max_wait = M``, by default ten times N): a
  burst of pushes collapses into one job that runs with the *last* push's
  arguments, ``N`` seconds after the last push, and never later than ``M`` seconds
  after the burst's first push (so a key pushed without a pause still runs). The
  pending job is an ordinary entry of the schedule set; each push takes the place
  of the one before in one script (``lua/debounce.lua``), so two processes pushing
  at once leave one job;
* ``throttle_for = N``: at most one push per ``N``-second slot (slots aligned on the
  epoch: ``floor(now / N)``) is admitted; the others are dropped, and their
  ``perform_async`` returns ``None``, as a unique duplicate's does
  (``lua/throttle.lua``: one ``SET NX``).

On a Redis Cluster (issue 46 item 3) every key of a policy is in the slot of the job's
queue (:mod:`wurk_django.redis.cluster_layout`): the debounce state, the queue's own
schedule set and index of pending debounced jobs, one script as on one server; the
throttle's slot key and the queue's drop counters, one script.

Both are keyed by the class and queue by default (a burst of ``Reindex`` pushes is
one burst whatever its arguments); a class method ``policy_key(job)`` returning
any JSON value narrows it (``return job["args"][0]``: one burst per user).

Policies act on a job's first push only: a job put back by the engine (an
iterable job's pause, a limiter's reschedule) is pushed again as it is. The
payload carries the options (``debounce_for``, ``debounce_max_wait``,
``throttle_for``, and ``debounced_at`` on a debounced job) as plain numbers, which a Ruby
Sidekiq process ignores.
"""

from __future__ import annotations

import math
from typing import Any

from .. import canonical, keys

DEBOUNCE = "debounce_for"
MAX_WAIT = "debounce_max_wait"
THROTTLE = "throttle_for"
UNIQUE = "unique_for"
#: Set on a debounced job by its push (epoch seconds of that push): the mark of a job already
#: debounced, so pushing it again (the admin's "Add to queue", a retry) runs it as it is.
DEBOUNCED_AT = "debounced_at"
#: The option that declares each policy.
DECLARING = (UNIQUE, DEBOUNCE, THROTTLE)
#: Without ``debounce_max_wait``, a burst runs at the latest this many quiet periods after it began.
MAX_WAIT_FACTOR = 10
#: The longest period accepted, in seconds (a day): a larger one is a unit mistake.
MAX_SECONDS = 86400


def problem(name: str, value: Any) -> str | None:
    """Why ``value`` cannot be the ``name`` period, or None (None itself means off)."""
    if value is None:
        return None
    seconds = value.total_seconds() if hasattr(value, "total_seconds") else value
    if (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
            or not math.isfinite(seconds) or not 0 < seconds <= MAX_SECONDS):
        return f"{name!r} must be seconds > 0 and at most {MAX_SECONDS} (or a timedelta), not {value!r:.60}"
    return None


def seconds(name: str, value: Any) -> float:
    """``value`` as seconds, or ``ValueError`` naming it."""
    reason = problem(name, value)
    if reason:
        raise ValueError(f"job option {reason}")
    return float(value.total_seconds() if hasattr(value, "total_seconds") else value)


def declared(options: dict) -> list[str]:
    """The policies ``options`` turn on (``unique_for``, ``debounce_for``, ``throttle_for``)."""
    return [name for name in DECLARING if options.get(name) not in (None, False)]


def check_class(dotted: str, cls: Any) -> None:
    """At class definition: one policy at most, and usable periods (``TypeError`` naming them)."""
    options = {name: getattr(cls, name, None) for name in (*DECLARING, MAX_WAIT)}
    extra = getattr(cls, "job_options", None)
    if isinstance(extra, dict):
        options.update({k: v for k, v in extra.items() if k in options and v is not None})
    policies = declared(options)
    if len(policies) > 1:
        raise TypeError(f"{dotted} declares {' and '.join(policies)}: a job class has one push policy "
                        "at most (unique, debounce or throttle)")
    for name in (DEBOUNCE, MAX_WAIT, THROTTLE):
        reason = problem(name, options.get(name))
        if reason:
            raise TypeError(f"{dotted}: {reason}")
    if options.get(MAX_WAIT) is not None and options.get(DEBOUNCE) is None:
        raise TypeError(f"{dotted}: 'debounce_max_wait' without 'debounce_for' means nothing")


def context_of(job: dict) -> Any:
    """What a policy's key is made of: the class and queue, or the class's ``policy_key(job)``."""
    from .. import registry

    job_class = registry.registered().get(job.get("class"))
    hook = getattr(job_class, "policy_key", None)
    base = [job.get("class"), job.get("queue")]
    return [*base, hook(job)] if callable(hook) else base


def digest_of(job: dict) -> str:
    """The digest naming ``job``'s policy key (of :func:`context_of`)."""
    return canonical.sha256_hex(context_of(job))


def debounce_key(job: dict, layout: Any = None) -> str:
    """The debounce state of ``job``'s key: ``debounce:<digest>`` on one server, in the slot of
    the job's queue on a Redis Cluster (``layout``: :data:`~wurk_django.redis.cluster_layout.CLUSTER`)."""
    if layout is None or not layout.cluster:
        return keys.debounce_state(digest_of(job))
    return layout.debounce_state(job["queue"], digest_of(job))


def throttle_key(job: dict, slot: int, layout: Any = None) -> str:
    """The throttle slot of ``job``'s key, as :func:`debounce_key` places it."""
    if layout is None or not layout.cluster:
        return keys.throttle_slot(digest_of(job), slot)
    return layout.throttle_slot(job["queue"], digest_of(job), slot)


def throttle_field(job: dict, period: float) -> str:
    """The drop counter's field of ``job``'s class and key: JSON ``{"context", "period"}``,
    from which the admin finds the current slot (the digest is the context's)."""
    return canonical.dumps({"context": context_of(job), "period": period})


def first_push(job: dict) -> bool:
    """Whether this push is the job's first: one the engine pushes again (a pause's re-push
    carries ``enqueued_at``, a limiter's reschedule ``overrated``, a debounced job taken from
    the schedule set ``debounced_at``) is written as it is."""
    return "enqueued_at" not in job and "overrated" not in job and DEBOUNCED_AT not in job
