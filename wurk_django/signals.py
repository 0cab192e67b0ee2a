"""Django signals for the job lifecycle (DJ-047).

Sent by the worker only when a receiver is connected, so an unused signal
costs one attribute check per job. ``sender`` is the job class (or the class
name when it could not be resolved); ``job`` is the payload dict.
"""

from django.dispatch import Signal

job_enqueued = Signal()  # sender, job
job_started = Signal()  # sender, job
job_succeeded = Signal()  # sender, job, elapsed
job_failed = Signal()  # sender, job, exception (every failed attempt)
job_retried = Signal()  # sender, job, exception, retry_at
job_died = Signal()  # sender, job, exception (dead set or discarded)
worker_startup = Signal()  # sender=Launcher
worker_quiet = Signal()
worker_shutdown = Signal()


def send(signal: Signal, sender, **kwargs) -> None:
    # The plain list check first: has_listeners() takes a lock, and this runs per job.
    if signal.receivers and signal.has_listeners(sender):
        signal.send(sender=sender, **kwargs)
