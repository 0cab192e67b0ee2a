"""The manager of one capsule's processor threads, in this process on the test database
(RUN-120, RUN-121, RUN-803): replacing a thread that exits, the bounded stop, and the
hard shutdown that requeues a job and unwinds it."""

from __future__ import annotations

import threading
import time

import pytest

from tests.jobsapp.capsule_jobs import StubbornJob
from tests.support import wait_for
from wurk_django import payload
from wurk_django.conf import Config
from wurk_django.metrics.tracker import MetricsTracker
from wurk_django.server.run import manager as manager_mod
from wurk_django.server.run.manager import Manager
from wurk_django.server.state import WorkerState


@pytest.fixture
def make(redis_db):
    made: list[Manager] = []

    def build(concurrency: int = 2) -> tuple[Manager, list[str]]:
        config = Config(QUEUES=["default"], CONCURRENCY=concurrency, FETCH_POLL_INTERVAL=0.2)
        asked: list[str] = []
        manager = Manager(config, WorkerState(), MetricsTracker(config),
                          request_shutdown=lambda: asked.append(threading.current_thread().name))
        made.append(manager)
        return manager, asked

    yield build
    for manager in made:
        manager.stop(time.monotonic())


def test_run_120_an_exited_processor_is_replaced_and_a_failed_replacement_asks_for_shutdown(make, monkeypatch):
    """RUN-120: the manager keeps ``concurrency`` processors: one that exits is replaced by
    a new thread; when no replacement can be built, the manager reports it and calls the
    injected shutdown request (never raising into the exiting thread); while stopping,
    nothing is replaced."""
    manager, asked = make(2)
    manager.start()
    wait_for(lambda: len(manager.alive_processors()) == 2, message="two processor threads")
    first = manager.alive_processors()[0]
    first.terminate()
    first.thread.join(10)
    wait_for(lambda: len(manager.alive_processors()) == 2 and first not in manager.alive_processors(),
             message="a replacement thread")
    assert asked == []

    def broken(_manager):
        raise RuntimeError("no thread for you")

    monkeypatch.setattr(manager_mod, "Processor", broken)
    second = manager.alive_processors()[0]
    second.terminate()
    second.thread.join(10)
    wait_for(lambda: asked, message="the shutdown request")
    assert manager.replace_failed and len(manager.alive_processors()) == 1
    monkeypatch.undo()
    manager.stop(time.monotonic() + 5)
    assert manager.alive_processors() == [] and len(asked) == 1


def test_run_121_run_803_a_stop_drains_then_requeues_and_unwinds_what_outlives_the_deadline(make, redis_db):
    """RUN-121: ``stop(deadline)`` quiets, polls until no processor thread is alive or the
    deadline is near, then hard-stops. RUN-803: the job still running is requeued first,
    then ``Shutdown`` is raised into its thread, so the job's own ``except``/``finally``
    runs; its thread's ``killed`` flag stops any ACK, so the job is in its queue once,
    and in no private list."""
    manager, _asked = make(1)
    StubbornJob.perform_async("s", 0.3)
    manager.start()
    wait_for(lambda: redis_db.lrange("test:started", 0, -1) == [b"s"], message="the job to start")
    [processor] = manager.alive_processors()
    manager.stop(time.monotonic() + 1)
    assert processor.killed
    assert manager.alive_processors() == []
    assert [v.split()[0] for v in redis_db.lrange("test:interrupted", 0, -1)] == [b"s"]
    assert [v.split()[0] for v in redis_db.lrange("test:lingered", 0, -1)] == [b"s"]  # unwound to its end
    assert [payload.loads(raw)["args"] for raw in redis_db.lrange("queue:default", 0, -1)] == [["s", 0.3]]
    assert list(redis_db.scan_iter(match="queue:default|*")) == []
