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


def test_jobs_fetched_ahead_or_in_a_threads_hands_are_not_drained(redis_db):
    # The in-process worker stopped with a job fetched ahead but not started (its queue was
    # empty and no thread was busy): a CI run saw the job never run.
    from types import SimpleNamespace

    from wurk_django.conf import Config
    from wurk_django.server.burst import drained

    fetcher = SimpleNamespace(order=SimpleNamespace(names=["default"]), in_hand=lambda: 1)
    processor = SimpleNamespace(unit=None)
    launcher = SimpleNamespace(config=Config(), state=SimpleNamespace(busy_count=lambda: 0),
                               managers=[SimpleNamespace(fetcher=fetcher, alive_processors=lambda: [processor])],
                               queue_names=["default"])
    assert drained(launcher) is False  # one fetched ahead
    fetcher.in_hand = lambda: 0
    processor.unit = object()
    assert drained(launcher) is False  # one handed to a thread that has not begun it
    processor.unit = None
    assert drained(launcher) is True
