"""Jobs of the status tests, at module level so a worker process resolves them by name."""

from __future__ import annotations

import time

from wurk_django.celery import shared_task
from wurk_django.job import Job
from wurk_django.redis.app import redis_client
from wurk_django.tasks.compat import AVAILABLE


def wait_for_go(key: str, seconds: float = 60) -> None:
    """Wait until the test says go (``go:<key>`` set), so it can look at the record meanwhile."""
    deadline = time.monotonic() + seconds
    while not redis_client().exists(f"go:{key}"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no go:{key}")
        time.sleep(0.02)


class Steps(Job):
    """Three steps, each reported and held until the test has seen it."""

    track = True

    def perform(self, key: str) -> dict:
        for step in (1, 2, 3):
            self.progress(step * 30, f"step {step}")
            wait_for_go(f"{key}:{step}")
        return {"key": key, "steps": 3}


class Flaky(Job):
    """Fails every attempt; one retry, then the dead set."""

    track = True
    retry = 1

    def perform(self, key: str) -> None:
        self.progress(50, "halfway")
        raise ValueError(f"broken {key}")


class Once(Job):
    """Fails once with no retry: the record ends ``failed`` at the first attempt."""

    track = 120
    retry = False

    def perform(self) -> None:
        raise RuntimeError("no retries here")


class Untracked(Job):
    """Every job of the test suite before tracking existed: no record."""

    def perform(self, key: str) -> int:
        self.progress(10, "nobody keeps this")
        return redis_client().incr(key)


class Unjsonable(Job):
    track = True

    def perform(self) -> object:
        return object()


@shared_task(bind=True)
def celery_counts(self, key):
    """Celery's usual progress: ``update_state("PROGRESS", {"current", "total"})``."""
    self.update_state(state="PROGRESS", meta={"current": 3, "total": 10, "status": "three of ten"})
    wait_for_go(key)
    return "counted"


if AVAILABLE:
    from wurk_django import status
    from wurk_django.tasks import task as wurk_task

    @wurk_task()
    def tasks_reports(key):
        """A ``django.tasks`` task (no ``self``) reports through ``wurk_django.status.progress``."""
        status.progress(75, "three quarters")
        wait_for_go(key)
        return "reported"


# -- the features of issue 47 together (tests/status/test_together.py) -------------------


class Held(Job):
    """Untracked by its class (a push over HTTP asks for a record); holds at 40 % until go."""

    def perform(self, key: str) -> str:
        self.progress(40, "halfway")
        wait_for_go(key)
        return key


class TrackedNote(Job):
    """Tracked, with retries: a deadline, not a failure, ends it."""

    track = True
    retry = 5

    def perform(self, key: str) -> None:
        redis_client().rpush("test:together", key)


class TrackedSpin(Job):
    """Tracked: reports, then spins in Python until something stops it."""

    track = True
    retry = 5

    def perform(self, key: str) -> None:
        self.progress(10, "spinning")
        end = time.monotonic() + 120
        while time.monotonic() < end:
            pass
        redis_client().rpush("test:together", f"{key}:not-stopped")


class TrackedDebounced(Job):
    """Tracked and debounced: a burst fires one job; each push keeps its own record."""

    track = True
    debounce_for = 1
    debounce_max_wait = 30

    def perform(self, version: int) -> int:
        self.progress(50, f"version {version}")
        redis_client().rpush("test:together", f"debounced:{version}")
        return version
