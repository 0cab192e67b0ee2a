"""An ``async def perform`` still running at the stop's deadline is cancelled: its task sees
``CancelledError`` at its ``await`` and the job goes back to its queue unacknowledged
(issue 31 item 3; RUN-850, RUN-203)."""

from __future__ import annotations

import json
import signal

import pytest

from tests.jobsapp.jobs import AsyncSleepJob
from tests.support import wait_for

pytestmark = pytest.mark.slow


def test_an_async_job_is_cancelled_at_the_deadline_and_requeued(redis_db, worker_factory):
    jid = AsyncSleepJob.perform_async(120)
    worker = worker_factory("-c", "1", "-t", "1")
    wait_for(lambda: redis_db.llen("test:started") == 1, timeout=60, message="the job running")
    worker.signal(signal.SIGTERM)
    assert worker.wait(timeout=60) == 0
    # The cancellation reached the coroutine (a Shutdown raised into the thread cannot:
    # the loop waits in epoll, where no bytecode runs).
    assert redis_db.lrange("test:async", 0, -1) == [b"cancelled"]
    queued = [json.loads(raw) for raw in redis_db.lrange("queue:default", 0, -1)]
    assert [job["jid"] for job in queued] == [jid]  # back on its queue, once
    assert redis_db.zcard("retry") == 0 and redis_db.zcard("dead") == 0  # not a failure
    assert "requeued" in worker.output()
