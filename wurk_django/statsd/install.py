"""Plug statsd into the engine. Client part: signal receivers for what a pushing process
sees (batches created and succeeded, pushes recovered). Server part: a job observer
for per-job metrics, receivers for expired and recovered jobs, a death handler for poison
pills.

Everything checks ``statsd.client()`` at run time, so with ``WURK["STATSD"]``
unset each hook costs one attribute lookup and sends nothing.
"""

from __future__ import annotations

from .. import signals
from . import client, emit, job_tags

#: Among the launcher's components: after the history rollups (30), nothing depends on it.
GAUGES_POSITION = 40


def _with_class(tags: list[str], klass: str) -> list[str]:
    """Ruby wurk tags ``jobs.expired``, ``jobs.poison`` and ``jobs.recovered.fetch`` with
    ``class:<class>`` where Sidekiq Pro's per-job metrics say ``worker:<class>``; both are
    sent, so a dashboard built for either side counts every process."""
    tag = f"class:{klass}"
    return tags if tag in tags else [*tags, tag]


def _klass(job: dict) -> str:
    return str(job.get("wrapped") or job.get("class"))


def _expired(sender, job: dict, queue: str, **_kw) -> None:
    if client() is not None:
        tags, rate = job_tags(_klass(job), job, queue)
        emit("increment", "jobs.expired", 1, _with_class(tags, _klass(job)), rate)


def _recovered_fetch(sender, queue: str, count: int, classes: dict[str, int] | None = None, **_kw) -> None:
    if client() is None:
        return
    if not classes:
        emit("increment", "jobs.recovered.fetch", count, [f"queue:{queue}"])
        return
    # One count a class, tagged as both sides tag it.
    for klass, n in classes.items():
        emit("increment", "jobs.recovered.fetch", n, [f"queue:{queue}", f"worker:{klass}", f"class:{klass}"])


def _rate_limited(sender, job: dict, **_kw) -> None:
    if client() is not None:
        tags, rate = job_tags(_klass(job), job, str(job.get("queue") or "default"))
        emit("increment", "jobs.rate_limited", 1, tags, rate)


def _retried(sender, job: dict, **_kw) -> None:
    if client() is not None:
        tags, rate = job_tags(_klass(job), job, str(job.get("queue") or "default"))
        emit("increment", "jobs.retried", 1, tags, rate)


def _enqueued(sender, job: dict, **_kw) -> None:
    if client() is not None:
        tags, rate = job_tags(_klass(job), job, str(job.get("queue") or "default"))
        emit("increment", "jobs.enqueued", 1, tags, rate)


def connect_enqueued() -> None:
    """``jobs.enqueued`` after each push, connected once a statsd client exists: the
    ``job_enqueued`` signal costs a push nothing while nobody listens, so a process with
    statsd off never pays for it."""
    signals.job_enqueued.connect(_enqueued, weak=False, dispatch_uid="wurk_statsd_enqueued")


def _recovered_push(sender, queue: str, count: int, **_kw) -> None:
    emit("increment", "jobs.recovered.push", count, [f"queue:{queue}"])


def _batch_created(sender, **_kw) -> None:
    emit("increment", "batch.created", 1)


def _batch_succeeded(sender, duration: float, **_kw) -> None:
    emit("distribution", "batch.duration_dist", duration)


def _poison(job: dict, exc: BaseException, reason: str) -> None:
    from ..death import POISON

    if client() is None:
        return
    queue = str(job.get("queue") or "default")
    if reason == POISON:
        tags, rate = job_tags(_klass(job), job, queue)
        emit("increment", "jobs.poison", 1, _with_class(tags, _klass(job)), rate)
    elif _is_encryption_error(exc):
        # Ruby wurk's name and tag for a job that could not be decrypted.
        emit("increment", "jobs.encryption_error", 1, [f"worker:{_klass(job)}"])


def _is_encryption_error(exc: BaseException) -> bool:
    from ..encryption.errors import EncryptionError  # a small module of exception classes

    return isinstance(exc, EncryptionError)


def install_client() -> None:
    # weak=False: these module functions live for the process anyway. A batch's success
    # may fire in the process that pushed its last job, not only in a worker.
    signals.pushes_recovered.connect(_recovered_push, weak=False, dispatch_uid="wurk_statsd_recovered_push")
    signals.batch_created.connect(_batch_created, weak=False, dispatch_uid="wurk_statsd_batch_created")
    signals.batch_succeeded.connect(_batch_succeeded, weak=False, dispatch_uid="wurk_statsd_batch_succeeded")
    client()  # with statsd on, building the client connects jobs.enqueued (connect_enqueued)


def install_death() -> None:
    """Count poison pills."""
    from .. import death

    death.register_handler("statsd", _poison, position=90)


def install_server() -> None:
    from ..server.run import observers
    from .observer import observe

    observers.register("statsd", observe)
    signals.job_expired.connect(_expired, weak=False, dispatch_uid="wurk_statsd_expired")
    signals.jobs_recovered.connect(_recovered_fetch, weak=False, dispatch_uid="wurk_statsd_recovered_fetch")
    signals.job_rate_limited.connect(_rate_limited, weak=False, dispatch_uid="wurk_statsd_rate_limited")
    signals.job_retried.connect(_retried, weak=False, dispatch_uid="wurk_statsd_retried")

    from ..server.launcher import register_component
    from .gauges import factory

    register_component("statsd-gauges", factory, position=GAUGES_POSITION, cluster=True)
