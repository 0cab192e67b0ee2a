"""Jobs for the queue limits tests (issue 47 item 4). They record in the test Redis."""

from __future__ import annotations

import os
import time

from wurk_django import Job
from wurk_django.redis.connection import get_redis


class Capped(Job):
    """Counts the jobs of its queue running at once: INCR when it starts, DECR when it ends.
    Each start records the count it saw (``test:caps:seen``) and the pid that ran it; a
    count above the limit means more ran at once than the limit lets."""

    queue = "reports"

    def perform(self, tag, seconds=0.3, once=False):
        redis = get_redis()
        if once and not redis.set(f"test:caps:once:{tag}", 1, nx=True):
            redis.rpush("test:caps:again", tag)  # run again after its process was killed: at once
            return
        running = redis.incr("test:caps:running")
        redis.rpush("test:caps:seen", running)
        redis.rpush("test:caps:pids", os.getpid())
        redis.rpush("test:caps:started", tag)
        try:
            time.sleep(seconds)
        finally:
            redis.decr("test:caps:running")
            redis.rpush("test:caps:done", tag)


class Free(Job):
    """A job of an uncapped queue: records that it ran, and whether capped jobs still waited."""

    queue = "default"

    def perform(self, tag):
        redis = get_redis()
        redis.rpush("test:free:done", tag)
        redis.rpush("test:free:capped-waiting", redis.llen("queue:reports"))


class CappedFails(Job):
    """Fails, with no retry: straight to the dead set."""

    queue = "reports"
    retry = 0

    def perform(self, tag):
        raise RuntimeError(f"{tag} fails on purpose")


class CappedStuck(Job):
    """One long C call: only its hard time limit stops it (the thread is abandoned)."""

    queue = "reports"
    time_limit = 1
    retry = 0

    def perform(self, tag):
        get_redis().rpush("test:caps:stuck", tag)
        time.sleep(60)
