"""Test helpers: push without Redis, or run jobs right where they are pushed (DJ-031).

Three modes, as in Sidekiq's testing API:

* ``"fake"``: pushes are recorded per job class instead of written to Redis;
  :func:`drain`, :func:`perform_one`, :func:`drain_all` run them in this thread.
* ``"inline"``: every push runs the job at once, in this thread, through the
  server middleware; an exception reaches the code that pushed.
* ``"disable"`` (or ``None``): the real thing.

Pick one for the whole test run with ``WURK["TESTING"]``, or for a block with
the :func:`fake`, :func:`inline` and :func:`disable` context managers (they
also work as decorators and win over the setting). Pushing happens after the
client middleware, so middleware still runs in every mode.

::

    with testing.fake():
        SendEmail.perform_async(1)
        assert len(testing.jobs(SendEmail)) == 1
        testing.drain(SendEmail)
"""

from __future__ import annotations

import contextlib
import threading
from collections import defaultdict
from collections.abc import Iterator
from typing import Any

from . import context, payload, registry
from .middleware import server_chain

__all__ = [
    "FakeJobsMixin",
    "clear",
    "clear_all",
    "disable",
    "drain",
    "drain_all",
    "fake",
    "inline",
    "jobs",
    "mode",
    "perform_one",
    "testing_mode",
]

_lock = threading.RLock()
# A process-wide stack, not a thread-local: test clients and live servers may push from other threads.
_overrides: list[str | None] = []
_fake_jobs: dict[str, list[dict]] = defaultdict(list)


def mode(config: Any = None) -> str | None:
    """The mode in force: ``"fake"``, ``"inline"`` or ``None`` (real pushes)."""
    if _overrides:
        current = _overrides[-1]
    else:
        if config is None:
            config = context.config()
        current = config.testing
    return None if current == "disable" else current


@contextlib.contextmanager
def testing_mode(name: str | None) -> Iterator[None]:
    """Use ``name`` (``"fake"``, ``"inline"``, ``"disable"``) inside the block."""
    if name not in ("fake", "inline", "disable", None):
        raise ValueError(f"testing mode must be 'fake', 'inline' or 'disable', not {name!r}")
    with _lock:
        _overrides.append(name)
    try:
        yield
    finally:
        with _lock:
            _overrides.pop()


def fake() -> contextlib.AbstractContextManager[None]:
    """Record pushes instead of writing them to Redis."""
    return testing_mode("fake")


def inline() -> contextlib.AbstractContextManager[None]:
    """Run each job as it is pushed."""
    return testing_mode("inline")


def disable() -> contextlib.AbstractContextManager[None]:
    """Push to Redis for real, whatever ``WURK["TESTING"]`` says."""
    return testing_mode("disable")


def intercept(jobs: list[dict], config: Any = None) -> bool:
    """Called by :meth:`Client.raw_push`: take the jobs in fake/inline mode (returns True)."""
    if not _overrides and (config is None or not config.testing):
        return False  # the common production path: no lock, no lookups
    current = mode(config)
    if current is None:
        return False
    now = context.config(config).wire_format.now()
    copies = []
    for job in jobs:
        stored = dict(job)
        if "at" not in stored:
            stored["enqueued_at"] = now
        # A JSON round trip, so the job sees exactly what a worker would read from Redis.
        copies.append(payload.loads(payload.dumps(stored)))
    if current == "inline":
        for job in copies:
            execute(job)
    else:
        with _lock:
            for job in copies:
                _fake_jobs[job["class"]].append(job)
    return True


def _name(job_class: Any) -> str:
    if isinstance(job_class, str):
        return job_class
    name = getattr(job_class, "job_name", None)
    if isinstance(name, str):
        return name
    raise TypeError(f"expected a Job class, a @job function or a class name, not {job_class!r}")


def jobs(job_class: Any = None) -> list[dict]:
    """Recorded payloads of ``job_class`` (all classes when omitted), oldest first.

    The list is live for one class: removing entries from it removes the jobs.
    """
    with _lock:
        if job_class is None:
            return [job for queue in _fake_jobs.values() for job in queue]
        return _fake_jobs[_name(job_class)]


def clear(job_class: Any) -> None:
    """Forget the recorded jobs of one class."""
    with _lock:
        _fake_jobs.pop(_name(job_class), None)


def clear_all() -> None:
    """Forget every recorded job."""
    with _lock:
        _fake_jobs.clear()


def _pop(name: str) -> dict | None:
    with _lock:
        queue = _fake_jobs.get(name)
        return queue.pop(0) if queue else None


def perform_one(job_class: Any) -> Any:
    """Run the oldest recorded job of ``job_class``; raises ``IndexError`` when there is none."""
    job = _pop(_name(job_class))
    if job is None:
        raise IndexError(f"no {_name(job_class)} jobs are queued")
    return execute(job)


def drain(job_class: Any) -> int:
    """Run recorded jobs of ``job_class`` (and any they push) until none is left; returns the count.

    Scheduled jobs run too, without waiting for their time. An exception stops
    the drain and propagates; the failed job is not put back.
    """
    name = _name(job_class)
    count = 0
    while (job := _pop(name)) is not None:
        execute(job)
        count += 1
    return count


def drain_all() -> int:
    """Run every recorded job, including jobs pushed while draining; returns the count."""
    count = 0
    while True:
        with _lock:
            name = next((n for n, q in _fake_jobs.items() if q), None)
        if name is None:
            return count
        job = _pop(name)
        if job is not None:
            execute(job)
            count += 1


def execute(job: dict) -> Any:
    """Run one payload in this thread the way a worker would, minus retries.

    The class is looked up in the job registry, ``jid``/``bid``/``payload``
    are set on the instance, and the server middleware wraps the call.
    """
    job_class = registry.resolve(job["class"])
    instance = job_class()
    instance.jid = job.get("jid")
    instance.bid = job.get("bid")
    instance.payload = job
    chain = server_chain(context.config())
    if "track" not in job:
        return chain.invoke((instance, job, job.get("queue")), lambda: instance.run(job["args"], job.get("kwargs")))
    return _tracked(chain, instance, job)


def _tracked(chain: Any, instance: Any, job: dict) -> Any:
    """A tracked job run here: its status record (in this process's memory, where
    ``wurk_django.status.get`` looks first) goes running, then complete or failed."""
    from .outcome import Outcome
    from .results import record

    attempt = record.begin_here(job, in_memory=True)
    try:
        value = chain.invoke((instance, job, job.get("queue")), lambda: instance.run(job["args"], job.get("kwargs")))
    except BaseException as exc:
        if attempt is not None:
            attempt.end(Outcome.DEAD, exc)  # no retries here: the failure ends it
        raise
    if attempt is not None:
        attempt.value = value
        attempt.end(Outcome.SUCCEEDED, None)
    return value


class FakeJobsMixin:
    """For ``TestCase`` classes: fake mode around every test, recorded jobs cleared after.

    ::

        class SignupTests(FakeJobsMixin, TestCase):
            ...
    """

    def setUp(self) -> None:  # noqa: N802 - unittest's name
        super().setUp()  # type: ignore[misc]
        mode_cm = fake()
        mode_cm.__enter__()
        self.addCleanup(mode_cm.__exit__, None, None, None)  # type: ignore[attr-defined]
        self.addCleanup(clear_all)  # type: ignore[attr-defined]
