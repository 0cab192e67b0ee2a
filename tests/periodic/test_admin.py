"""The admin's Periodic page (ENT-802, ENT-804): rows, actions, permissions, CSRF, read-only mode."""

from __future__ import annotations

import json

import pytest
from django.middleware.csrf import get_token
from django.test import Client

from tests.admin.conftest import BASE, heartbeat, make_user
from tests.support import queued
from wurk_django import periodic
from wurk_django.periodic import registration

pytestmark = pytest.mark.django_db
PAGE = BASE + "periodic/"


@pytest.fixture
def loops(redis_db):
    registration.forget_code_registrations()
    nightly = periodic.register("0 4 * * *", "tests.jobsapp.jobs.RecordJob", queue="low", args=["x"],
                                tz="Asia/Tokyo", label="nightly")
    sweep = periodic.register("*/5 * * * *", "tests.jobsapp.jobs.PidJob", args=["s"])
    periodic.pause(sweep.lid)
    redis_db.hset(f"loops:{nightly.lid}", mapping={"lf": "1736103600", "nf": "1736190000"})
    redis_db.lpush(f"loop-history:{nightly.lid}", json.dumps([1736103600, "feedfacefeedfacefeedface"]))
    yield {"nightly": nightly.lid, "sweep": sweep.lid}
    registration.forget_code_registrations()


def test_lists_loops_in_their_zone_with_words_and_cron(admin_client, loops, redis_db):
    redis_db.set("dear-leader", "web.1:4242:abc123")
    redis_db.hset("leader-info", mapping={"identity": "web.1:4242:abc123", "since": "1736100000.5", "token": 7})
    response = admin_client.get(PAGE)
    body = response.content.decode()
    assert response.status_code == 200
    assert ">Periodic<" in body  # the tab
    assert "every day at 04:00" in body and "<code>0 4 * * *</code>" in body
    assert "tests.jobsapp.jobs.RecordJob" in body and "Asia/Tokyo" in body and "nightly" in body
    # lf 1736103600 = 2025-01-05 19:00 UTC = 2025-01-06 04:00 in Tokyo (JST)
    assert "2025-01-06 04:00 JST" in body
    assert "2025-01-07 04:00 JST" in body
    rows = {row["lid"]: row for row in response.context["loops"]}
    assert rows[loops["sweep"]]["paused"] and rows[loops["sweep"]]["next"] is None  # a paused row shows no next fire
    assert "web.1:4242:abc123" in body and "term 7" in body
    assert "Pause" in body and "Unpause" in body and "Enqueue now" in body


def test_history_page(admin_client, loops):
    response = admin_client.get(PAGE + loops["nightly"] + "/")
    body = response.content.decode()
    assert response.status_code == 200
    assert "feedfacefeedfacefeedface" in body and "2025-01-06 04:00:00 JST" in body
    assert admin_client.get(PAGE + "0123456789abcdef/").status_code == 404
    assert admin_client.get(PAGE + "not-a-lid/").status_code == 404


def test_pause_unpause_and_enqueue_now(admin_client, loops, redis_db):
    lid = loops["nightly"]
    admin_client.post(PAGE, {"action": "pause", "lid": lid})
    assert redis_db.hget(f"loops:{lid}", "paused") == b"1"
    admin_client.post(PAGE, {"action": "unpause", "lid": lid})
    assert redis_db.hget(f"loops:{lid}", "paused") == b"0"
    response = admin_client.post(PAGE + lid + "/", {"action": "enqueue", "lid": lid}, follow=True)
    [job] = queued(redis_db, "low")
    assert job["class"] == "tests.jobsapp.jobs.RecordJob" and job["args"] == ["x"]
    assert job["jid"] in response.content.decode()
    # Enqueue now leaves the marks and the history alone (ENT-802)
    assert redis_db.hget(f"loops:{lid}", "lf") == b"1736103600"
    assert redis_db.llen(f"loop-history:{lid}") == 1


def test_unknown_loop_or_action(admin_client, loops, redis_db):
    response = admin_client.post(PAGE, {"action": "pause", "lid": "0123456789abcdef"}, follow=True)
    assert "No periodic job" in response.content.decode()
    assert not redis_db.exists("loops:0123456789abcdef")
    response = admin_client.post(PAGE, {"action": "delete", "lid": loops["nightly"]}, follow=True)
    assert "Unknown action" in response.content.decode()
    assert redis_db.exists(f"loops:{loops['nightly']}")


def test_no_leader(admin_client, loops):
    assert "No process leads right now" in admin_client.get(PAGE).content.decode()


def test_viewer_sees_no_buttons_and_cannot_post(client, loops, redis_db):
    client.force_login(make_user("viewer", perms=("view_dashboard",)))
    body = client.get(PAGE).content.decode()
    assert "Enqueue now" not in body and "every day at 04:00" in body
    assert client.post(PAGE, {"action": "pause", "lid": loops["nightly"]}).status_code == 403
    assert redis_db.hget(f"loops:{loops['nightly']}", "paused") == b"0"


def test_anonymous_is_sent_to_login(client, loops):
    response = client.get(PAGE)
    assert response.status_code == 302 and response["Location"].startswith("/admin/login/")


def test_post_needs_a_csrf_token(loops, redis_db):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(make_user("manager", perms=("view_dashboard", "manage_jobs")))
    assert csrf_client.post(PAGE, {"action": "pause", "lid": loops["nightly"]}).status_code == 403
    assert redis_db.hget(f"loops:{loops['nightly']}", "paused") == b"0"
    page = csrf_client.get(PAGE)
    token = get_token(page.wsgi_request)
    csrf_client.post(PAGE, {"action": "pause", "lid": loops["nightly"], "csrfmiddlewaretoken": token})
    assert redis_db.hget(f"loops:{loops['nightly']}", "paused") == b"1"


def test_read_only_mode_hides_buttons_and_refuses_posts(admin_client, loops, redis_db, settings):
    settings.WURK = {**settings.WURK, "ADMIN_READ_ONLY": True}
    assert "Enqueue now" not in admin_client.get(PAGE).content.decode()
    assert admin_client.post(PAGE, {"action": "enqueue", "lid": loops["nightly"]}).status_code == 403
    assert admin_client.post(PAGE + loops["nightly"] + "/", {"action": "pause",
                                                              "lid": loops["nightly"]}).status_code == 403
    assert queued(redis_db, "low") == []
    assert redis_db.hget(f"loops:{loops['nightly']}", "paused") == b"0"


def test_busy_page_marks_the_leader(admin_client, redis_db):
    # ENT-804
    leader = heartbeat(redis_db, "web.1:4242:abc123")
    heartbeat(redis_db, "web.2:4343:def456")
    redis_db.set("dear-leader", leader)
    body = admin_client.get(BASE + "busy/").content.decode()
    row = body.split('data-identity="web.1:4242:abc123"')[1].split("</tr>")[0]
    other = body.split('data-identity="web.2:4343:def456"')[1].split("</tr>")[0]
    assert ">leader<" in row and ">leader<" not in other
