"""Workflow unit tests run their jobs in this process through the real server chain
(the batch tests' ``run_jobs``): batch callbacks, results and deaths as a worker does them."""

from __future__ import annotations

import pytest

from tests.batch.conftest import run_jobs


def ran(redis_db) -> list[str]:
    return [v.decode() for v in redis_db.lrange("test:wf:ran", 0, -1)]


@pytest.fixture
def work(redis_db):
    return lambda queues=("default",): run_jobs(redis_db, queues)
