"""A Celery task's state on the paths issue 44 item 2 names that other tests leave out, on
real worker processes: an uncaught soft time limit, and a worker killed mid-task."""

from __future__ import annotations

import pytest

from tests.results import tasks
from tests.results.conftest import MODULES
from tests.support import beating, wait_for
from wurk_django.celery import exceptions, states

pytestmark = pytest.mark.slow


def _started(redis_db, key: str) -> bool:
    return b"started" in redis_db.lrange(key, 0, -1)


def test_an_uncaught_soft_time_limit_reads_failure_and_get_raises_celerys_exception(redis_db, worker):
    # As on Celery: the task did not catch SoftTimeLimitExceeded, so it failed with it.
    result = tasks.celery_soft_unhandled.delay("test:soft")
    worker()
    wait_for(lambda: result.state == states.FAILURE, timeout=60, message="the soft limit to fail the task")
    with pytest.raises(exceptions.SoftTimeLimitExceeded):
        result.get(timeout=5)
    assert isinstance(result.result, exceptions.SoftTimeLimitExceeded) and result.failed()


def test_a_task_whose_worker_is_killed_reads_started_then_the_rerun_s_result(redis_db, worker_factory):
    # Celery with acks_late and reject_on_worker_lost (what CELERY_TASK_ACKS_LATE and
    # CELERY_TASK_REJECT_ON_WORKER_LOST ask for; wurk always behaves so): the call is
    # delivered again and its result is the new run's, never a result of the lost run.
    result = tasks.celery_busy.delay("test:killed", 2)
    first = worker_factory("-c", "2", "-q", "default", env=MODULES)
    wait_for(lambda: _started(redis_db, "test:killed"), timeout=60, message="the task to start")
    wait_for(lambda: result.state == states.STARTED, timeout=10, message="the record to read STARTED")
    # Killed once it has beaten, as a worker killed in production: the restart then knows
    # at once that it is gone (a kill before the first beat waits out the orphan grace).
    wait_for(lambda: beating(redis_db, first.pid), timeout=30, message="the worker's heartbeat")
    first.kill()
    assert result.state == states.STARTED and not result.ready()
    worker_factory("-c", "2", "-q", "default", env=MODULES)  # a restart takes the killed one's jobs back
    assert result.get(timeout=60) == "done"
    assert result.state == states.SUCCESS and redis_db.llen("test:killed") == 2  # it ran again, once
