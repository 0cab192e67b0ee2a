"""Fixtures of the Celery-layer tests: an in-process worker over the queues they use."""

from __future__ import annotations

import pytest

QUEUES = ["default", "celery_kw"]


@pytest.fixture
def drain():
    """Run an in-process worker (``wurk --burst``) until the test's queues are empty."""
    from wurk_django.conf import Config
    from wurk_django.server.burst import run_burst

    def run(timeout: float = 30.0) -> None:
        assert run_burst(Config(queues=QUEUES), timeout=timeout), "the worker did not empty the queues"

    return run


@pytest.fixture
def due_retries(redis_db):
    """Move every entry of the retry set onto its queue now, as the poller does when it is due
    (the retry layer adds up to 10 x (retries + 1) seconds of jitter no test should wait for)."""
    import json

    def move() -> list[dict]:
        moved = []
        for raw in redis_db.zrange("retry", 0, -1):
            job = json.loads(raw)
            redis_db.zrem("retry", raw)
            redis_db.lpush(f"queue:{job['queue']}", raw)
            moved.append(job)
        return moved

    return move
