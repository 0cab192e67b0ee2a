"""Admin rough edges (issue 17): Busy state, uptime, history totals, ?poll=true, CSP nonce,
arguments shown as a call, the django.tasks results page."""

from __future__ import annotations

import json
import re

import django
import pytest
from django.test import override_settings

from wurk_django import payload
from wurk_django.admin.dashboard import uptime_text
from wurk_django.tasks.compat import AVAILABLE as TASKS_AVAILABLE

from .conftest import BASE, enqueue, job

pytestmark = pytest.mark.django_db


def _heartbeat(redis_db, identity="box:1:abc", quiet="false", version="9.9.9"):
    redis_db.sadd("processes", identity)
    redis_db.hset(identity, mapping={
        "info": json.dumps({"identity": identity, "hostname": "box", "pid": 1, "tag": "t", "version": version,
                            "queues": ["default"], "concurrency": 2, "started_at": 1.0}),
        "busy": 0, "beat": 2.0, "quiet": quiet, "concurrency": 2,
    })


def test_busy_state_column_shows_the_state_and_version_apart(admin_client, redis_db):
    _heartbeat(redis_db, "box:1:aaa", quiet="false")
    _heartbeat(redis_db, "box:2:bbb", quiet="true")
    html = admin_client.get(BASE + "busy/").content.decode()
    assert "<th>State</th><th>Version</th>" in html
    running = html.split('data-identity="box:1:aaa"')[1].split("</tr>")[0]
    quiet = html.split('data-identity="box:2:bbb"')[1].split("</tr>")[0]
    assert 'class="wurk-state"><span class="wurk-badge ok">running</span>' in running
    assert 'class="wurk-state"><span class="wurk-badge warn">quiet</span>' in quiet
    assert '<td class="wurk-quiet">9.9.9</td>' in running


@pytest.mark.parametrize("seconds, text", [(0, "0 s"), (59, "59 s"), (60, "1 min"), (3 * 3600 + 12 * 60, "3 h 12 min"),
                                           (86400, "1 day"), (5 * 86400 + 7, "5 days")])
def test_uptime_text(seconds, text):
    assert uptime_text(seconds) == text


def test_dashboard_uptime_and_history_base(admin_client, redis_db):
    from datetime import UTC, datetime, timedelta

    today = datetime.now(UTC).date()
    redis_db.set(f"stat:processed:{today}", 5)
    redis_db.set(f"stat:processed:{today - timedelta(days=1)}", 7)
    html = admin_client.get(BASE).content.decode()
    assert 'data-base-processed="7"' in html  # today's 5 is added live by the page
    assert '<span data-history-total="processed">12</span>' in html
    assert ">0 days<" not in html.split('data-stat="uptime"')[1].split("</p>")[0]
    stats = admin_client.get(BASE + "stats.json").json()
    assert stats["today"]["date"] == today.isoformat()
    assert stats["redis"]["uptime"] == uptime_text(stats["redis"]["uptime_in_seconds"])


def test_poll_mode_on_list_pages(admin_client, redis_db):
    """CORE-181: live polling on list pages."""
    html = admin_client.get(BASE + "queues/").content.decode()
    assert "data-poll" not in html and 'href="/admin/wurk_django/dashboard/queues/?poll=true"' in html
    html = admin_client.get(BASE + "retries/?poll=true&substr=x").content.decode()
    assert 'data-poll="5"' in html and "Live: on" in html
    assert 'href="/admin/wurk_django/dashboard/retries/?substr=x"' in html
    assert "wurk-live-toggle" not in admin_client.get(BASE).content.decode()  # the dashboard polls anyway


@pytest.mark.skipif(django.VERSION < (6, 0), reason="Django's CSP middleware arrived in 6.0")
def test_pages_carry_the_csp_nonce(client, redis_db):
    from django.conf import settings
    from django.utils.csp import CSP

    from .conftest import make_user

    strict = {"default-src": [CSP.SELF], "script-src": [CSP.NONCE, CSP.STRICT_DYNAMIC],
              "style-src": [CSP.SELF, CSP.NONCE], "object-src": [CSP.NONE], "base-uri": [CSP.NONE]}
    csp = "django.middleware.csp.ContentSecurityPolicyMiddleware"
    middleware = [*settings.MIDDLEWARE, *([] if csp in settings.MIDDLEWARE else [csp])]
    from tests.jobsapp.workflow_jobs import Add
    from wurk_django.workflow import chain

    client.force_login(make_user("cspuser", superuser=True))
    workflow = chain(Add.s(1), Add.s(2)).run()
    step_batch = workflow.steps()[0].bid  # a batch's page loads batch.js too (issue 45 item 3)
    with override_settings(MIDDLEWARE=middleware, SECURE_CSP=strict):
        for page in ("", "busy/", "queues/", "retries/", "tasks/",  # Django 6: the Tasks page exists
                     f"workflows/{workflow.id}/", f"batches/{step_batch}/"):
            response = client.get(BASE + page)
            header = response.headers["Content-Security-Policy"]
            nonce = header.split("'nonce-")[1].split("'")[0]
            html = response.content.decode()
            assert f'wurk.js" defer nonce="{nonce}"' in html, page
            assert f'wurk.css" nonce="{nonce}"' in html, page
            assert "<script>" not in html and " style=" not in html and "onclick" not in html, page
            scripts = re.findall(r"<script [^>]*wurk_django/[^>]*>", html)
            assert scripts and all(f'nonce="{nonce}"' in tag for tag in scripts), (page, scripts)


needs_tasks = pytest.mark.skipif(not TASKS_AVAILABLE, reason="neither django.tasks (Django 6+) nor the django-tasks backport")


@needs_tasks
def test_task_arguments_show_as_a_call(admin_client, redis_db):
    task_job = job("wurk_django.tasks.TaskJob", args=[[2, 40], {"round": True}], wrapped="tests.tasks.sample.add",
                   display_class="tests.tasks.sample.add", task={"backend": "default", "queue_name": "default"})
    plain = job("HardJob", args=[1, "two"])
    enqueue(redis_db, task_job, plain)
    html = admin_client.get(BASE + "queues/default/").content.decode()
    assert "add(2, 40, round=True)" in html
    assert "1, &quot;two&quot;" in html
    assert f'/admin/wurk_django/dashboard/tasks/{task_job["jid"]}/' in html


def _result(redis_db, jid, **fields):
    from wurk_django.results import store

    base = {"state": "complete", "class": "tests.tasks.sample.add", "task": {"queue_name": "default"},
            "args": [2, 40], "kwargs": {}, "errors": [], "worker_ids": ["w1"], "enqueued_at": payload.now_ms(),
            "started_at": payload.now_ms(), "finished_at": payload.now_ms(), "return_value": 42}
    store.write(redis_db, jid, {**base, **fields}, 3600)


@needs_tasks
def test_tasks_page_lists_filters_and_shows_results(admin_client, redis_db):
    ok, bad = payload.new_jid(), payload.new_jid()
    _result(redis_db, ok)
    _result(redis_db, bad, state="dead", class_="x", errors=[{"exception_class_path": "builtins.ValueError",
                                                               "traceback": "Traceback...\nValueError: no"}])
    redis_db.hdel(f"status:{bad}", "return_value")
    html = admin_client.get(BASE + "tasks/").content.decode()
    assert "add(2, 40)" in html and "SUCCESSFUL" in html and "FAILED" in html and "builtins.ValueError" in html
    assert "<code class=\"wurk-args\">42</code>" in html
    failed_only = admin_client.get(BASE + "tasks/?status=FAILED").content.decode()
    assert bad in failed_only and ok not in failed_only
    assert ok in admin_client.get(BASE + f"tasks/?q={ok}").content.decode()
    detail = admin_client.get(BASE + f"tasks/{bad}/").content.decode()
    assert "ValueError: no" in detail and "In the dead set" in detail and f"dead/?substr={bad}" in detail
    assert admin_client.get(BASE + f"tasks/{payload.new_jid()}/").status_code == 404
    assert admin_client.get(BASE + "tasks/not-an-id/").status_code == 404


@needs_tasks
@pytest.mark.parametrize("field, value", [("started_at", "soon"), ("finished_at", str(10**20)), ("args", "{not json")])
def test_one_unreadable_task_result_is_a_row_with_its_key(admin_client, redis_db, field, value):  # issue 45 item 3
    ok, bad = payload.new_jid(), payload.new_jid()
    _result(redis_db, ok)
    _result(redis_db, bad)
    redis_db.hset(f"status:{bad}", field, value)
    response = admin_client.get(BASE + "tasks/")
    html = response.content.decode()
    assert response.status_code == 200 and f'<tr data-id="{ok}">' in html
    row = html[html.index(f'<tr data-id="{bad}" class="wurk-unreadable">'):]
    row = row[:row.index("</tr>")]
    assert f"status:{bad}" in row and "unreadable" in row


@needs_tasks
def test_tasks_page_permissions(client, redis_db, viewer):
    assert client.get(BASE + "tasks/").status_code == 302  # to the login page
    client.force_login(viewer)
    assert client.get(BASE + "tasks/").status_code == 200
    assert client.post(BASE + "tasks/").status_code in (403, 405)


def test_prometheus_has_per_queue_and_per_class_series(admin_client, redis_db):
    from datetime import UTC, datetime

    from tests.metrics.test_query import sidekiq_flush

    from .conftest import heartbeat

    enqueue(redis_db, job(), job(queue="mail"))
    redis_db.sadd("paused", "mail")
    heartbeat(redis_db, busy=2, work={"t1": job("ReportJob", queue="mail"), "t2": job("ReportJob", queue="mail")})
    sidekiq_flush(redis_db, datetime.now(UTC), {"ReportJob": {"p": 12, "f": 2, "ms": 5400}, "Mail\"Job": {"p": 3}})
    text = admin_client.get(BASE + "prometheus").content.decode()
    assert 'wurk_queue_paused{queue="mail"} 1' in text and 'wurk_queue_paused{queue="default"} 0' in text
    assert 'wurk_running_jobs{queue="mail",class="ReportJob"} 2' in text
    assert 'wurk_job_executions_last_hour{class="ReportJob"} 12' in text
    assert 'wurk_job_failures_last_hour{class="ReportJob"} 2' in text
    assert 'wurk_job_seconds_last_hour{class="ReportJob"} 5.4' in text
    assert 'wurk_job_executions_last_hour{class="Mail\\"Job"} 3' in text  # label values are escaped
    for line in text.splitlines():
        assert line.startswith("#") or " " in line


NEW_PAGES = ["history/", "history/?range=7d", "profiles/", *(["tasks/"] if TASKS_AVAILABLE else [])]


@pytest.mark.parametrize("page", NEW_PAGES)
def test_new_pages_follow_the_dashboard_rules(client, redis_db, viewer, page):
    from .conftest import make_user

    assert client.get(BASE + page).status_code == 302  # anonymous: to the login page
    client.force_login(make_user("plainstaff"))
    assert client.get(BASE + page).status_code == 403  # staff without view_dashboard
    client.force_login(viewer)
    assert client.get(BASE + page).status_code == 200
    assert client.post(BASE + page).status_code in (403, 405)  # read-only pages: GET only


@pytest.mark.parametrize("page", NEW_PAGES)
def test_new_pages_in_read_only_mode(admin_client, redis_db, page):
    from tests.support import wurk_settings

    with wurk_settings(ADMIN_READ_ONLY=True):
        assert admin_client.get(BASE + page).status_code == 200
        assert admin_client.post(BASE + page).status_code in (403, 405)
