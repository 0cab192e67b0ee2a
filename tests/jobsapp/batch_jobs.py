"""Jobs and callback classes for the batch tests. They record what they did in the test Redis."""

from __future__ import annotations

import os
import time

from wurk_django import Job
from wurk_django.batch import Batch
from wurk_django.redis.connection import get_redis


def record(key: str, value: str) -> None:
    get_redis().rpush(key, value)


class Noop(Job):
    def perform(self, *args):
        return None


class Mark(Job):
    """Records ``<bid>:<value>`` in ``test:marks``."""

    def perform(self, value):
        record("test:marks", f"{self.bid}:{value}")


class SlowMark(Job):
    def perform(self, value, seconds=0.01):
        time.sleep(seconds)
        record("test:marks", f"{self.bid}:{value}")


class FailOnce(Job):
    """Fails on its first run, succeeds on the next (retried after one second)."""

    retry = 5
    retry_in = staticmethod(lambda count, exc, job: 1)

    def perform(self, key):
        if get_redis().incr(f"test:failonce:{key}") == 1:
            raise RuntimeError(f"{key} fails once")
        record("test:marks", f"{self.bid}:{key}")


class AlwaysFails(Job):
    retry = 0

    def perform(self, key="x"):
        record("test:attempts", key)
        raise RuntimeError(f"{key} always fails")


class AddSibling(Job):
    """Reopens its own batch and adds one more job to it."""

    def perform(self, value):
        with self.batch.jobs():
            Mark.perform_async(f"{value}-sibling")
        record("test:marks", f"{self.bid}:{value}")


class OpensBatch(Job):
    """A plain job (no bid of its own) that opens a new batch and records the batch's live
    members as seen inside the block (``test:members``: only its hold, the pushes wait for the block's end)."""

    def perform(self):
        batch = Batch()
        with batch.jobs():
            Mark.perform_async("child")
            members = get_redis().smembers(f"b-{batch.bid}-jids")
        for member in sorted(m.decode() for m in members):
            record("test:members", member)


class KillSelfOnce(Job):
    """The first run kills its own worker process (kill -9), later runs succeed."""

    def perform(self, key):
        import signal

        if get_redis().incr(f"test:killonce:{key}") == 1:
            time.sleep(0.03)  # let the sibling threads get mid-job
            os.kill(os.getpid(), signal.SIGKILL)
        record("test:marks", f"{self.bid}:{key}")


class Callbacks:
    """Records each callback run in ``test:callbacks`` as ``<event>:<bid>:<option>``."""

    def on_success(self, status, options):
        record("test:callbacks", f"success:{status.bid}:{options.get('tag', '')}")
        record("test:callback-pending", f"{status.bid}:{status.pending}:{status.total}")

    def on_complete(self, status, options):
        record("test:callbacks", f"complete:{status.bid}:{options.get('tag', '')}")

    def on_death(self, status, options):
        record("test:callbacks", f"death:{status.bid}:{options.get('tag', '')}")

    def custom(self, status, options):
        record("test:callbacks", f"custom:{status.bid}:{options.get('tag', '')}")


class NextStage:
    """A success callback that opens the next stage in the parent batch."""

    def on_success(self, status, options):
        record("test:callbacks", f"stage:{status.bid}:{options.get('stage')}")
        if options.get("stage") == 1 and status.parent_bid:
            parent = Batch(status.parent_bid)
            with parent.jobs():
                child = Batch()
                child.on("success", NextStage, {"stage": 2})
                with child.jobs():
                    Mark.perform_async("stage-2")


class Broken:
    def on_success(self, status, options):
        raise RuntimeError("callback body fails")


class MarkThenWait(Job):
    """Records first, then works for ``seconds``: a kill during the wait leaves a job that
    ran (visibly) but never finished, so its recovery runs it again."""

    def perform(self, value, seconds=0.1):
        record("test:marks", f"{self.bid}:{value}")
        time.sleep(seconds)


class SecretFails(Job):
    """An encrypted job that fails: its retry entry holds the sealed argument."""

    encrypt = True
    retry = 3

    def perform(self, value, secret):
        raise RuntimeError(f"{value} fails")
