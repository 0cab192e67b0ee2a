"""The admin's view of job status (issue 47 item 2): a progress bar under each tracked
running job on the Busy page, a job's status page and the JSON its bars poll."""

from __future__ import annotations

import json

from tests.admin.conftest import BASE, heartbeat, job
from wurk_django import payload
from wurk_django.results import store


def _running(redis_db, jid: str, **fields) -> None:
    store.write(redis_db, jid, {"state": "running", "class": "ResizeJob", "enqueued_at": payload.now_ms() - 5000,
                                "started_at": payload.now_ms() - 3000, "worker_ids": ["w1"], "errors": [],
                                **fields}, 600)


def test_busy_shows_a_progress_bar_for_tracked_running_jobs_only(admin_client, redis_db):
    tracked = job("ResizeJob", track=600)
    plain = job("PlainJob")
    celery_quiet = job("CeleryJob", result_ttl=600)  # keeps a record, never reported progress
    _running(redis_db, tracked["jid"], progress=40, message="resizing")
    _running(redis_db, celery_quiet["jid"])
    heartbeat(redis_db, busy=3, work={"t1": tracked, "t2": plain, "t3": celery_quiet})
    body = admin_client.get(BASE + "busy/").content.decode()
    assert body.count('<progress max="100"') == 1
    assert '<progress max="100" value="40"' in body and "resizing" in body
    assert f'data-status-url="{BASE}status/{tracked["jid"]}.json"' in body
    assert f'href="{BASE}status/{tracked["jid"]}/"' in body
    assert f"status/{plain['jid']}" not in body and f"status/{celery_quiet['jid']}" not in body


def test_busy_with_no_tracked_job_reads_no_record(admin_client, redis_db, monkeypatch):
    from wurk_django import status

    monkeypatch.setattr(status, "get_many", lambda *a, **k: (_ for _ in ()).throw(AssertionError("read")))
    heartbeat(redis_db, busy=1, work={"t1": job("PlainJob")})
    assert admin_client.get(BASE + "busy/").status_code == 200


def test_the_status_page_and_its_json(admin_client, redis_db):
    jid = payload.new_jid()
    _running(redis_db, jid, progress=62.5, message="step 5 of 8")
    body = admin_client.get(BASE + f"status/{jid}/").content.decode()
    assert '<progress max="100" value="62.5"' in body and "step 5 of 8" in body and "ResizeJob" in body
    assert 'data-finished="false"' in body and "data-reload-when-finished" in body
    data = json.loads(admin_client.get(BASE + f"status/{jid}.json").content)
    assert (data["state"], data["progress"], data["message"], data["finished"]) == ("running", 62.5, "step 5 of 8",
                                                                                   False)
    assert "errors" not in data  # tracebacks stay on the page
    store.write(redis_db, jid, {"state": "complete", "return_value": {"rows": 8}, "progress": 100,
                                "finished_at": payload.now_ms()}, 600)
    body = admin_client.get(BASE + f"status/{jid}/").content.decode()
    assert 'data-finished="true"' in body and '<pre id="wurk-status-result">{&quot;rows&quot;:8}</pre>' in body


def test_a_failed_jobs_page_shows_its_errors_and_an_unknown_one_is_404(admin_client, redis_db):
    jid = payload.new_jid()
    _running(redis_db, jid, state="failed", errors=[{"exception_class_path": "builtins.ValueError",
                                                      "message": "bad", "traceback": "Traceback: ValueError: bad"}])
    body = admin_client.get(BASE + f"status/{jid}/").content.decode()
    assert "builtins.ValueError" in body and "Traceback: ValueError: bad" in body
    assert admin_client.get(BASE + f"status/{payload.new_jid()}/").status_code == 404
    assert admin_client.get(BASE + f"status/{payload.new_jid()}.json").status_code == 404


def test_the_status_page_in_french(admin_client, redis_db):
    jid = payload.new_jid()
    _running(redis_db, jid, progress=10)
    admin_client.defaults["HTTP_ACCEPT_LANGUAGE"] = "fr"
    body = admin_client.get(BASE + f"status/{jid}/").content.decode()
    assert "en cours" in body and "Dernier point d’avancement" in body and "Progression" in body


def test_a_tracked_jobs_page_in_a_set_links_to_its_status(admin_client, redis_db):
    from tests.admin.conftest import add_to_set

    tracked, plain = job("ResizeJob", track=600), job("PlainJob")
    at = add_to_set(redis_db, "retry", tracked)
    add_to_set(redis_db, "retry", plain, at + 1)
    body = admin_client.get(BASE + f"retries/job/{payload.score(at)}-{tracked['jid']}/").content.decode()
    assert f'href="{BASE}status/{tracked["jid"]}/"' in body
    body = admin_client.get(BASE + f"retries/job/{payload.score(at + 1)}-{plain['jid']}/").content.decode()
    assert "wurk-job-status" not in body
