"""Plug statsd into the engine. Client part: signal receivers for what a pushing process
sees (batches created and succeeded, pushes recovered). Server part: a server middleware
for per-job metrics, receivers for expired and recovered jobs, a death handler for poison
pills.

Everything checks ``statsd.client()`` at run time, so with ``WURK["STATSD"]``
unset each hook costs one attribute lookup and sends nothing.
"""

from __future__ import annotations

from .. import signals
from . import client, emit, job_tags

#: Inside the user's SERVER_MIDDLEWARE, right around ``perform``: the timing is
#: the job's own work, as with Pro's middleware added at the end of the chain.
MIDDLEWARE_POSITION = 10


def _expired(sender, job: dict, queue: str, **_kw) -> None:
    if client() is not None:
        tags, rate = job_tags(str(job.get("wrapped") or job.get("class")), job, queue)
        emit("increment", "jobs.expired", 1, tags, rate)


def _recovered_fetch(sender, queue: str, count: int, **_kw) -> None:
    emit("increment", "jobs.recovered.fetch", count, [f"queue:{queue}"])


def _recovered_push(sender, queue: str, count: int, **_kw) -> None:
    emit("increment", "jobs.recovered.push", count, [f"queue:{queue}"])


def _batch_created(sender, **_kw) -> None:
    emit("increment", "batch.created", 1)


def _batch_succeeded(sender, duration: float, **_kw) -> None:
    emit("distribution", "batch.duration_dist", duration)


def _poison(job: dict, exc: BaseException, reason: str) -> None:
    """Death handler: ``jobs.poison`` for a poison pill, ``jobs.encryption_error`` for a job
    whose argument could not be decrypted (ENT-608)."""
    from ..server.death import INVALID, POISON  # here, not at the top: the client part must not load the engine

    if client() is None or reason not in (POISON, INVALID):
        return
    if reason == INVALID:
        from ..encryption.errors import EncryptionError

        if not isinstance(exc, EncryptionError):
            return
    queue = str(job.get("queue") or "default")
    tags, rate = job_tags(str(job.get("wrapped") or job.get("class")), job, queue)
    emit("increment", "jobs.poison" if reason == POISON else "jobs.encryption_error", 1, tags, rate)


def install_client() -> None:
    # weak=False: these module functions live for the process anyway. A batch's success
    # may fire in the process that pushed its last job, not only in a worker.
    signals.pushes_recovered.connect(_recovered_push, weak=False, dispatch_uid="wurk_statsd_recovered_push")
    signals.batch_created.connect(_batch_created, weak=False, dispatch_uid="wurk_statsd_batch_created")
    signals.batch_succeeded.connect(_batch_succeeded, weak=False, dispatch_uid="wurk_statsd_batch_succeeded")


def install_server() -> None:
    from .. import middleware
    from ..server import death
    from .middleware import StatsdMiddleware

    middleware.register("server", "statsd", StatsdMiddleware, position=MIDDLEWARE_POSITION)
    death.register_handler("statsd", _poison, position=90)
    signals.job_expired.connect(_expired, weak=False, dispatch_uid="wurk_statsd_expired")
    signals.jobs_recovered.connect(_recovered_fetch, weak=False, dispatch_uid="wurk_statsd_recovered_fetch")
