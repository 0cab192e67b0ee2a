"""A django.tasks task that dies outside a run still ends FAILED (issue 11 item 3, DJ-021):
killed as a poison pill by the reaper, or killed from the admin."""

from __future__ import annotations

import subprocess
import time

import pytest

from wurk_django.tasks.compat import AVAILABLE

if not AVAILABLE:
    pytest.skip("neither django.tasks (Django 6+) nor the django-tasks backport", allow_module_level=True)

from tests.admin.conftest import BASE, make_user  # noqa: E402
from tests.tasks import sample  # noqa: E402
from wurk_django import payload  # noqa: E402
from wurk_django.results import store  # noqa: E402
from wurk_django.server.fetch.reliable import private_list  # noqa: E402
from wurk_django.server.reaper import Reaper  # noqa: E402
from wurk_django.tasks.compat import TaskResultStatus  # noqa: E402


def _running(redis_db, jid: str) -> None:
    """What a worker writes when it starts the task (then it dies with it)."""
    store.write(redis_db, jid, {"state": "running", "started_at": payload.now_ms()}, 3600)


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_task_killed_as_a_poison_pill_ends_failed(backend, redis_db):
    result = sample.add.enqueue(1, 2)
    raw = redis_db.rpop("queue:default")
    _running(redis_db, result.id)
    assert sample.add.get_result(result.id).status == TaskResultStatus.RUNNING
    for _ in range(3):  # PRO-152: the third recovery from a crashed worker kills it
        redis_db.delete("queue:default")
        redis_db.lpush(private_list("default", _dead_pid()), raw)
        # A reaper interval passes: a job suspected again waits for its turn, alone.
        redis_db.delete("super_fetch:reaper:paced:default")
        Reaper(["default"], grace=0).boot_sweep()
    assert redis_db.llen("queue:default") == 0 and redis_db.zcard("dead") == 1
    after = sample.add.get_result(result.id)
    assert after.status == TaskResultStatus.FAILED and after.finished_at is not None


@pytest.mark.parametrize("how", ["one", "all"])
def test_task_killed_from_the_admin_ends_failed(backend, redis_db, client, db, how,
                                               django_capture_on_commit_callbacks):
    # The test runs inside a transaction (db): the push waits for a commit, played here.
    with django_capture_on_commit_callbacks(execute=True):
        result = sample.fail.enqueue("later")
    raw = redis_db.rpop("queue:default")
    _running(redis_db, result.id)
    at = time.time() + 60
    redis_db.zadd("retry", {raw: at})
    client.force_login(make_user("admin", superuser=True))
    if how == "one":
        response = client.post(BASE + f"retries/job/{payload.score(at)}-{result.id}/", {"action": "kill"})
    else:
        response = client.post(BASE + "retries/all/kill/")
    assert response.status_code == 302
    assert redis_db.zcard("retry") == 0 and redis_db.zcard("dead") == 1
    after = sample.fail.get_result(result.id)
    assert after.status == TaskResultStatus.FAILED and after.finished_at is not None
