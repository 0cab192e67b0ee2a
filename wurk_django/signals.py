"""Django signals for the job lifecycle (DJ-047).

Sent by the worker only when a receiver is connected, so an unused signal
costs one attribute check per job. ``sender`` is the job class (or the class
name when it could not be resolved); ``job`` is the payload dict.
"""

import logging

from django.dispatch import Signal

logger = logging.getLogger("wurk_django.worker")

job_enqueued = Signal()  # sender, job
job_started = Signal()  # sender, job
job_succeeded = Signal()  # sender, job, elapsed
job_failed = Signal()  # sender, job, exception (every failed attempt)
job_retried = Signal()  # sender, job, exception, retry_at
job_died = Signal()  # sender, job, exception (dead set or discarded)
job_rate_limited = Signal()  # sender, job, exception, retry_at (None: stopped at the reschedule cap)
# Worker lifecycle (server/events.py), sender=Launcher, launcher: startup runs before any
# thread (a raising receiver aborts the boot); quiet, shutdown and exit run newest receiver
# first; heartbeat when the process registers in Redis; beat after every heartbeat beat.
worker_startup = Signal()
worker_quiet = Signal()
worker_shutdown = Signal()
worker_exit = Signal()
worker_heartbeat = Signal()
worker_beat = Signal()
# Operational events (statsd and other metrics receivers listen to these).
job_expired = Signal()  # sender, job, queue: skipped unrun because its ``expires_in`` passed
# sender="reaper", queue, count, classes ({class: count}): jobs given back from a dead process's private list
jobs_recovered = Signal()
pushes_recovered = Signal()  # sender="reliable_push", queue, count: buffered pushes delivered after an outage
# sender="reliable_push", jobs: buffered pushes dropped from a full buffer in the drop_oldest mode
pushes_dropped = Signal()
batch_created = Signal()  # sender="batch", bid: a batch's first flush (sent by the batch feature)
batch_succeeded = Signal()  # sender="batch", bid, duration (seconds from creation to :success)
leader_elected = Signal()  # sender=Leader, identity, token (the term's fencing token), leader


def send(signal: Signal, sender, **kwargs) -> None:
    """Send ``signal`` if anyone listens. A receiver that raises is logged and never
    changes the job's outcome (a failing ``job_succeeded`` receiver must not retry it)."""
    # The plain list check first: has_listeners() takes a lock, and this runs per job.
    if signal.receivers and signal.has_listeners(sender):
        for receiver, result in signal.send_robust(sender=sender, **kwargs):
            if isinstance(result, Exception):
                logger.error("signal receiver %r failed", receiver, exc_info=result)
