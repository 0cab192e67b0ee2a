"""Burst mode: ``manage.py wurk --burst`` and the in-process ``wurk_worker`` fixture (DJ-032, DJ-040)."""

from __future__ import annotations

from tests.jobsapp.jobs import FailingJob, RecordJob
from wurk_django.pytest_plugin import wurk_worker  # noqa: F401 - the fixture under test


def test_burst_command_exits_once_the_queues_are_empty(redis_db, worker_factory):
    for i in range(20):
        RecordJob.perform_async(i)
    worker = worker_factory("--burst", "-c", "3")
    assert worker.wait(timeout=30) == 0
    assert redis_db.llen("test:ran") == 20
    assert redis_db.scard("processes") == 0


def test_wurk_worker_fixture_runs_jobs_in_process(redis_db, wurk_worker):  # noqa: F811
    RecordJob.perform_async("a")
    FailingJob.perform_async("b")
    assert wurk_worker(timeout=20) is True
    assert redis_db.lrange("test:ran", 0, -1) == [b"a"]
    assert redis_db.zcard("retry") == 1  # the real retry layer ran
    assert redis_db.llen("queue:default") == 0
