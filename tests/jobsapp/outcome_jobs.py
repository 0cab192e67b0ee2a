"""Jobs that end a run in each outcome, and the payload a worker would fetch for one: for the
tests that run a job through the real processor (tests/server/run/test_outcome.py,
tests/queue_limits/test_settle.py)."""

from __future__ import annotations

from wurk_django import Job, limiter, payload


class Fine(Job):
    def perform(self, *args):
        pass


class Broken(Job):
    retry = 3

    def perform(self, *args):
        raise ValueError("broken")


class Doomed(Job):
    retry = 0

    def perform(self, *args):
        raise RuntimeError("doomed on purpose")


class Limited(Job):
    def perform(self, *args):
        raise limiter.OverLimit(limiter.concurrent("outcome-test", 1, backoff=lambda *_a: 60))


def a_job(klass: type | str, queue: str = "default", **extra) -> dict:
    """A payload of ``klass`` (a class or its name) on ``queue``, as fetched, with retries on."""
    name = klass if isinstance(klass, str) else f"{klass.__module__}.{klass.__qualname__}"
    return {"class": name, "args": [1], "queue": queue, "jid": payload.new_jid(), "retry": True,
            "created_at": payload.now_ms(), "enqueued_at": payload.now_ms(), **extra}
