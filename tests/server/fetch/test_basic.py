"""BasicFetch, Sidekiq's ``BRPOP`` fetcher, selected by ``FETCH_CLASS`` in a real worker
(CORE-104, CORE-250): no private list, no ACK, and a hard shutdown's ``RPUSH`` back to
the fetch end."""

from __future__ import annotations

import json
import signal

import pytest

from tests.jobsapp.jobs import RecordJob, SlowJob
from tests.support import wait_for
from wurk_django.conf import Config

BASIC = {"FETCH_CLASS": "wurk_django.server.fetch.basic.BasicFetch"}


def test_core_250_reliable_fetch_is_the_default():
    """CORE-250: with no ``FETCH_CLASS`` the manager builds the reliable fetcher."""
    from wurk_django.server.fetch.basic import BasicFetch
    from wurk_django.server.fetch.reliable import ReliableFetch
    from wurk_django.server.run import manager

    assert Config().fetch_class is None
    assert manager.ReliableFetch is ReliableFetch
    assert Config(FETCH_CLASS=BASIC["FETCH_CLASS"]).fetch_class is BasicFetch


@pytest.mark.slow
def test_core_250_basic_fetch_runs_oldest_first_holds_no_copy_and_requeues_at_the_fetch_end(
        redis_db, worker_factory):
    """CORE-250, CORE-104: under BasicFetch a worker consumes a queue oldest first with
    ``BRPOP``, keeps no copy of a running job in Redis, and at a stop past its timeout
    pushes the job back with ``RPUSH`` (the end the next fetch takes)."""
    for name in ("first", "second", "third"):
        RecordJob.perform_async(name)
    worker = worker_factory("-c", "1", "-t", "1", env={"WURK_TEST_EXTRA": json.dumps(BASIC)})
    wait_for(lambda: redis_db.llen("test:ran") == 3, timeout=30, message="three jobs to run")
    assert redis_db.lrange("test:ran", 0, -1) == [b"first", b"second", b"third"]
    long = SlowJob.perform_async(600, "long")
    wait_for(lambda: redis_db.lrange("test:started", 0, -1) == [b"long"], timeout=30, message="the long job")
    assert list(redis_db.scan_iter(match="queue:*|*")) == []  # no private list: the job is only in memory
    RecordJob.perform_async("waiting")  # pushed to the far end while the long job runs
    worker.signal(signal.SIGTERM)
    assert worker.wait(60) == 0
    queued = [json.loads(raw) for raw in redis_db.lrange("queue:default", 0, -1)]
    assert [job["args"][-1] for job in queued] == ["waiting", "long"]  # RPUSH: fetched next
    assert queued[-1]["jid"] == long
