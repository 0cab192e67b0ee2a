"""Stop on the Busy page, Cancel on a queued and a scheduled job (issue 27 item 4): each asks
for confirmation and revokes the job under the signed-in user's name. Stop reaches a job
running in a real worker process at once, not at the process's next beat (issue 44 item 3)."""

from __future__ import annotations

import json
import time

import pytest

from tests.api.revoke_tasks import BEFORE_NEXT_BEAT, ENV, running, stops_fast, the_process
from wurk_django import payload

from .conftest import BASE, add_to_set, enqueue, heartbeat, job

pytestmark = pytest.mark.django_db


def _dead(redis_db) -> dict[str, dict]:
    return {entry["jid"]: entry for entry in (json.loads(raw) for raw in redis_db.zrange("dead", 0, -1))}


def test_busy_page_stop_sends_a_terminating_revoke_to_the_process(admin_client, redis_db):
    running = job("ReportJob", queue="mail", jid="r" * 24)
    identity = heartbeat(redis_db, busy=1, work={"t1x": running})
    body = admin_client.get(BASE + "busy/").content.decode()
    assert 'name="jid" value="' + "r" * 24 in body and 'value="stop_job"' in body
    assert "data-confirm=\"Stop job " + "r" * 24 in body
    response = admin_client.post(BASE + "busy/", {"action": "stop_job", "jid": "r" * 24}, follow=True)
    assert "Stop sent for job" in response.content.decode()
    (command,) = redis_db.lrange(f"{identity}-signals", 0, -1)
    assert command.startswith(b"REVOKE ")
    sent = json.loads(command[len(b"REVOKE "):])
    assert sent["jid"] == "r" * 24 and sent["by"] == "admin" and sent["terminate"] is True


def test_cancel_a_queued_job_from_its_queue_page(admin_client, redis_db):
    item = job("ReportJob", jid="q" * 24)
    enqueue(redis_db, item)
    body = admin_client.get(BASE + "queues/default/").content.decode()
    assert 'value="cancel"' in body and "Revoke this job?" in body
    response = admin_client.post(BASE + "queues/default/action/", {"action": "cancel", "jid": "q" * 24}, follow=True)
    assert "cancelled" in response.content.decode()
    assert redis_db.llen("queue:default") == 0
    entry = _dead(redis_db)["q" * 24]
    assert entry["revoked_by"] == "admin" and "revoked by admin" in entry["error_message"]


def test_cancel_a_scheduled_job_from_its_page(admin_client, redis_db):
    at = add_to_set(redis_db, "schedule", job("ReportJob", jid="s" * 24), at=None)
    key = f"{payload.score(at)}-{'s' * 24}"
    body = admin_client.get(BASE + f"scheduled/job/{key}/").content.decode()
    assert 'value="cancel"' in body and "data-confirm=\"Revoke this job?" in body
    admin_client.post(BASE + f"scheduled/job/{key}/", {"action": "cancel"})
    assert redis_db.zcard("schedule") == 0
    assert _dead(redis_db)["s" * 24]["revoked_by"] == "admin"


def test_a_viewer_sees_no_stop_button_and_cannot_stop(client, viewer, redis_db):
    identity = heartbeat(redis_db, busy=1, work={"t1x": job("ReportJob", jid="v" * 24)})
    client.force_login(viewer)
    assert 'value="stop_job"' not in client.get(BASE + "busy/").content.decode()
    assert client.post(BASE + "busy/", {"action": "stop_job", "jid": "v" * 24}).status_code == 403
    assert redis_db.llen(f"{identity}-signals") == 0 and redis_db.zcard("revoked") == 0


@pytest.mark.slow
def test_stop_on_the_busy_page_stops_a_running_job_before_the_next_beat(admin_client, redis_db, worker_factory):
    worker = worker_factory("-c", "2", env=ENV)
    result = running(redis_db, "t:admin", the_process(redis_db))
    started = time.monotonic()
    response = admin_client.post(BASE + "busy/", {"action": "stop_job", "jid": result.id}, follow=True)
    assert "Stop sent for job" in response.content.decode()
    try:
        elapsed = stops_fast(redis_db, "t:admin", result, started)
    except AssertionError:
        print(worker.output())
        raise
    assert elapsed < BEFORE_NEXT_BEAT, f"stopped after {elapsed:.2f} s: it waited for the process's beat"
    assert _dead(redis_db)[result.id]["revoked_by"] == "admin"
