"""A Celery task stopped by its hard time limit, in a real worker (issue 41 item 1): its
result reads FAILURE with the error that stopped it, and stays so when its abandoned
thread comes back and returns."""

from __future__ import annotations

import time

import pytest

from tests.jobsapp.limit_jobs import overrun
from tests.support import wait_for
from wurk_django.celery import states
from wurk_django.errors import HardTimeLimitExceeded

pytestmark = pytest.mark.slow


def test_a_hard_limited_task_fails_with_its_error_and_a_late_thread_changes_nothing_rule_issue_41_item_1(
        redis_db, worker_factory):
    result = overrun.delay("test:overrun", 4)
    worker_factory("-c", "1")
    wait_for(lambda: result.state == states.FAILURE, timeout=30, message="the task's result to read FAILURE")
    with pytest.raises(HardTimeLimitExceeded, match="hard time limit"):
        result.get(timeout=1)
    wait_for(lambda: redis_db.lrange("test:overrun", 0, -1), timeout=30, message="the abandoned thread to wake")
    time.sleep(1.0)  # what the late thread would write, it has written
    assert result.state == states.FAILURE
    with pytest.raises(HardTimeLimitExceeded):
        result.get(timeout=1)
