"""A task whose run outlives a worker's stop is put back on its queue, and its result goes
back to READY with it (issue 45 item 1): the next worker runs it to SUCCESSFUL."""

from __future__ import annotations

import json

import pytest

from wurk_django.tasks.compat import AVAILABLE

if not AVAILABLE:
    pytest.skip("neither django.tasks (Django 6+) nor the django-tasks backport", allow_module_level=True)

from tests.support import wait_for  # noqa: E402
from tests.tasks import sample  # noqa: E402
from wurk_django import payload  # noqa: E402
from wurk_django.tasks.compat import TaskResultStatus  # noqa: E402

pytestmark = pytest.mark.slow

TASK_MODULES = {"WURK_TEST_EXTRA": json.dumps({"IMPORT_ON_MISS": ["tests.jobsapp", "tests.tasks"]})}


@pytest.mark.parametrize("where", ["c", "python"])
def test_a_task_put_back_by_a_stop_reads_ready_and_runs_on_the_next_worker(backend, redis_db, worker_factory,
                                                                             where):
    # Before: the job went back on its queue but its result read RUNNING until a worker took it
    # again, when the stop could not interrupt its thread (asleep in C: the process exits first).
    result = sample.outlives_a_stop.enqueue(30, where)
    first = worker_factory("-c", "1", "-t", "1", env=TASK_MODULES)
    wait_for(lambda: sample.outlives_a_stop.get_result(result.id).status == TaskResultStatus.RUNNING,
             timeout=30, message="the task to start")
    first.stop(timeout=20)
    assert first.proc.returncode is not None
    [raw] = redis_db.lrange("queue:default", 0, -1)
    assert payload.loads(raw)["jid"] == result.id  # put back on its queue
    back = sample.outlives_a_stop.get_result(result.id)
    assert back.status == TaskResultStatus.READY, first.output()
    assert back.finished_at is None and back.errors == []

    worker_factory("-c", "1", env=TASK_MODULES)
    done = wait_for(lambda: (r := sample.outlives_a_stop.get_result(result.id)).is_finished and r,
                    timeout=30, message="the next worker to run it")
    assert done.status == TaskResultStatus.SUCCESSFUL and done.return_value == "ran"
    assert len(done.worker_ids) == 2
