"""A dead job's record reads failed / FAILURE with its error, and nothing rewrites it
afterwards (issue 41 item 5)."""

from __future__ import annotations

import time

import pytest

from tests.results import tasks
from tests.support import wait_for
from wurk_django.celery import exceptions, states
from wurk_django.results import store


@pytest.mark.slow
def test_a_job_killed_by_its_hard_time_limit_reads_failure_with_its_error_for_good(redis_db, worker):
    # Before: FAILURE with no stored error, then the abandoned thread came back and rewrote it
    # to RETRY for good (.get() timed out on a dead job).
    result = tasks.celery_stuck.delay("test:stuck")
    worker()
    wait_for(lambda: result.state == states.FAILURE, timeout=60, message="the hard limit to kill it")
    [dead] = redis_db.zrange("dead", 0, -1)
    assert b"HardTimeLimitExceeded" in dead
    wait_for(lambda: b"came back" in redis_db.lrange("test:stuck", 0, -1), timeout=30,
             message="the abandoned thread to come back")
    time.sleep(1.0)  # its run's end, had it been written, lands right after it returns
    assert result.state == states.FAILURE
    fields = store.read(redis_db, result.id)
    assert fields["state"] == "failed" and "return_value" not in fields
    [error] = fields["errors"]
    assert error["exception_class_path"].endswith("HardTimeLimitExceeded")
    with pytest.raises(exceptions.TimeLimitExceeded, match="hard time limit"):  # what Celery code catches
        result.get(timeout=5)


@pytest.mark.slow
def test_a_retry_booked_after_a_hard_time_limit_is_not_overwritten_by_the_abandoned_run(redis_db, worker):
    # Before: the record stayed STARTED, then the thread came back and wrote SUCCESS while the
    # job waited in the retry set to run again.
    result = tasks.celery_stuck_retried.delay("test:stuck-retried")
    worker()
    wait_for(lambda: result.state == states.RETRY, timeout=60, message="the hard limit to book a retry")
    assert redis_db.zcard("retry") == 1
    wait_for(lambda: b"came back" in redis_db.lrange("test:stuck-retried", 0, -1), timeout=30,
             message="the abandoned thread to come back")
    time.sleep(1.0)
    assert result.state == states.RETRY and redis_db.zcard("retry") == 1
    [error] = store.read(redis_db, result.id)["errors"]
    assert error["exception_class_path"].endswith("HardTimeLimitExceeded")
