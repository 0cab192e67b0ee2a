"""How a job's run ends: one value per run, settled in one place.

The processor records the outcome on the job's :class:`~wurk_django.context.JobContext`
(``ctx.outcome``) and :func:`wurk_django.server.run.settle.settle` acts on it: the
acknowledgement, booking the retry, the job log line, the signals and the counters. Engine
control flow never travels as an exception through features: a server
middleware that wants to know how the job ended reads
``context.current().outcome`` after ``call_next()`` returns (``None`` there
means the job returned normally; the processor makes it ``SUCCEEDED``), and a
feature that ends a run itself (a limiter's reschedule, an argument that cannot
be decrypted) sets it and returns instead of raising.

Exceptions raised by the job's own code are still exceptions: they reach the
processor, which records ``FAILED`` and the error, and the retry layer turns
that into ``RETRIED``, ``DEAD`` or ``DISCARDED``.
"""

from __future__ import annotations

import enum


class Outcome(enum.Enum):
    #: ``perform`` returned (or a middleware chose not to run it, e.g. an expired job).
    SUCCEEDED = "succeeded"
    #: ``perform`` raised ``ctx.error``; the retry layer has not booked it yet.
    FAILED = "failed"
    #: The failure is booked in the ``retry`` set.
    RETRIED = "retried"
    #: The job ended for good and was not kept (``retry: false``, ``dead: false``, a hook's "discard").
    DISCARDED = "discarded"
    #: The job ended for good in the dead set (retries used up, a kill, a payload that cannot run).
    DEAD = "dead"
    #: A feature pushed the job again for later (a rate limit); this run is done. It is
    #: neither a success nor a failure: the job log says ``rescheduled``, the job metrics
    #: do not count it, statsd counts ``jobs.rate_limited``.
    RESCHEDULED = "rescheduled"
    #: The job asked to resume later (``JobInterrupted``, an iterable job); the processor
    #: re-pushes it, and this run counts in the job metrics like a success (CORE-210).
    PAUSED = "paused"
    #: The worker is stopping: the job was put back on its queue and runs again (never acknowledged).
    INTERRUPTED = "interrupted"
    #: The outcome could not be recorded (Redis down): the job goes back on its queue.
    GIVEN_BACK = "given_back"


#: Outcomes that end with the job acknowledged (taken out of the worker's private list).
ACKNOWLEDGED = frozenset({Outcome.SUCCEEDED, Outcome.RETRIED, Outcome.DISCARDED, Outcome.DEAD,
                          Outcome.RESCHEDULED, Outcome.PAUSED})
