"""Who may see and change what (DJ-050..DJ-052, DJ-056, CORE-184)."""

from __future__ import annotations

import pytest
from django.middleware.csrf import get_token
from django.test import Client

from wurk_django import payload

from .conftest import BASE, add_to_set, enqueue, failed, heartbeat, job, make_user

pytestmark = pytest.mark.django_db

GET_PAGES = ["", "busy/", "queues/", "queues/default/", "scheduled/", "retries/", "dead/",
             "retries/all/retry/", "metrics/", "metrics/HardJob/"]
API = ["stats.json", "stats/queues.json", "prometheus"]


@pytest.fixture
def state(redis_db):
    """One of everything a POST could change, so a refused POST can be shown to change nothing."""
    item = job(jid="q1")
    enqueue(redis_db, item)
    retry = failed(jid="r1")
    at = add_to_set(redis_db, "retry", retry)
    add_to_set(redis_db, "dead", failed(jid="d1"))
    add_to_set(redis_db, "schedule", job(jid="s1"))
    identity = heartbeat(redis_db)
    return {"queue_raw": payload.dumps(item).decode(), "retry_key": f"{payload.score(at)}-r1", "identity": identity}


def posts(state) -> list[tuple[str, dict]]:
    """Every state-changing endpoint with a body that would work."""
    return [
        ("busy/", {"identity": state["identity"], "action": "quiet"}),
        ("busy/", {"action": "stop"}),
        ("queues/default/action/", {"action": "pause"}),
        ("queues/default/action/", {"action": "clear"}),
        ("queues/default/delete/", {"key_val": state["queue_raw"]}),
        ("retries/", {"action": "delete", "key": state["retry_key"]}),
        (f"retries/job/{state['retry_key']}/", {"action": "retry"}),
        ("retries/all/delete/", {}),
        ("dead/all/retry/", {}),
        ("scheduled/all/add_to_queue/", {}),
    ]


def snapshot(redis_db) -> tuple:
    return (redis_db.llen("queue:default"), redis_db.zcard("retry"), redis_db.zcard("dead"),
            redis_db.zcard("schedule"), redis_db.smembers("paused"),
            redis_db.llen("web.1:4242:abc123-signals"))


@pytest.mark.parametrize("page", GET_PAGES)
def test_anonymous_is_sent_to_the_login_page(client, page):
    response = client.get(BASE + page)
    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/?next=")


@pytest.mark.parametrize("page", API)
def test_anonymous_api_is_401(client, page):
    response = client.get(BASE + page)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_non_staff_user_is_sent_to_login(client):
    client.force_login(make_user("customer", staff=False, perms=("view_dashboard", "manage_jobs")))
    assert client.get(BASE).status_code == 302
    assert client.get(BASE + "stats.json").status_code == 401


def test_staff_without_the_view_permission_gets_403_and_no_sidebar_entry(client):
    client.force_login(make_user("plainstaff"))
    assert client.get(BASE).status_code == 403
    assert client.get(BASE + "busy/").status_code == 403
    index = client.get("/admin/")
    assert index.status_code == 200
    assert BASE.encode() not in index.content


def test_viewer_sees_pages_and_the_admin_index_entry(client, viewer, state):
    client.force_login(viewer)
    for page in GET_PAGES + API:
        assert client.get(BASE + page).status_code == 200, page
    index = client.get("/admin/").content.decode()
    assert "Wurk" in index and BASE in index


@pytest.mark.parametrize("index", range(10))
def test_viewer_cannot_post(client, viewer, state, redis_db, index):
    client.force_login(viewer)
    before = snapshot(redis_db)
    page, data = posts(state)[index]
    assert client.post(BASE + page, data).status_code == 403
    assert snapshot(redis_db) == before


def test_viewer_gets_no_buttons(client, viewer, state):
    client.force_login(viewer)
    assert b"Retry now" not in client.get(BASE + "retries/").content
    assert b'value="pause"' not in client.get(BASE + "queues/").content
    assert b'value="quiet"' not in client.get(BASE + "busy/").content


@pytest.mark.parametrize("index", range(10))
def test_every_post_without_csrf_token_is_refused(manager, state, redis_db, index):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(manager)
    before = snapshot(redis_db)
    page, data = posts(state)[index]
    response = csrf_client.post(BASE + page, data)
    assert response.status_code == 403
    assert b"CSRF" in response.content
    assert snapshot(redis_db) == before


def test_post_with_csrf_token_goes_through(manager, state, redis_db):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(manager)
    page = csrf_client.get(BASE + "queues/")
    token = get_token(page.wsgi_request)
    response = csrf_client.post(BASE + "queues/default/action/", {"action": "pause", "csrfmiddlewaretoken": token})
    assert response.status_code == 302
    assert redis_db.sismember("paused", "default")


def test_get_never_changes_anything(manager_client, state, redis_db):
    before = snapshot(redis_db)
    for page in ["busy/?action=stop", "queues/default/action/?action=clear", "retries/all/delete/",
                 f"retries/job/{state['retry_key']}/?action=retry", "dead/all/retry/"]:
        response = manager_client.get(BASE + page)
        assert response.status_code in (200, 405), page
    assert snapshot(redis_db) == before


def test_read_only_refuses_every_post_even_for_superusers(admin_client, state, redis_db, settings):
    """DJ-051: permissions, read-only mode, authorize hook."""
    settings.WURK = {**settings.WURK, "ADMIN_READ_ONLY": True}
    before = snapshot(redis_db)
    for page, data in posts(state):
        assert admin_client.post(BASE + page, data).status_code == 403, page
    assert snapshot(redis_db) == before
    assert b"Retry now" not in admin_client.get(BASE + "retries/").content


def deny_posts(request, method, path):
    return method == "GET"


def test_authorize_hook_runs_last(admin_client, state, redis_db, settings):
    """ENT-805: authorization hook `(request, method, path)`; DJ-051: permissions, read-only mode, authorize hook."""
    settings.WURK = {**settings.WURK, "ADMIN_AUTHORIZE": "tests.admin.test_permissions.deny_posts"}
    assert admin_client.get(BASE + "queues/").status_code == 200
    assert admin_client.post(BASE + "queues/default/action/", {"action": "pause"}).status_code == 403
    assert not redis_db.sismember("paused", "default")


def test_bearer_token_for_the_api(client, settings):
    settings.WURK = {**settings.WURK, "API_TOKEN": "s3cret-token-0123456789"}
    good = client.get(BASE + "stats.json", HTTP_AUTHORIZATION="Bearer s3cret-token-0123456789")
    assert good.status_code == 200
    assert good.json()["sidekiq"]["processed"] == 0
    assert client.get(BASE + "stats.json", HTTP_AUTHORIZATION="Bearer wrong").status_code == 401
    assert client.get(BASE + "prometheus", HTTP_AUTHORIZATION="Bearer s3cret-token-0123456789").status_code == 200
    # The token opens only the API, not the pages.
    assert client.get(BASE, HTTP_AUTHORIZATION="Bearer s3cret-token-0123456789").status_code == 302


def test_no_token_configured_means_no_bearer_access(client):
    assert client.get(BASE + "stats.json", HTTP_AUTHORIZATION="Bearer ").status_code == 401


def test_responses_are_not_cached_or_sniffed(admin_client):
    for page in ("", "stats.json"):
        response = admin_client.get(BASE + page)
        assert "no-store" in response["Cache-Control"] and "private" in response["Cache-Control"]
        assert response["X-Content-Type-Options"] == "nosniff"


@pytest.mark.urls("tests.admin.urls")
def test_custom_admin_site(client, viewer, redis_db):
    client.force_login(viewer)
    enqueue(redis_db, job())
    page = client.get("/ops/wurk_django/dashboard/queues/")
    assert page.status_code == 200
    body = page.content.decode()
    assert "Ops console" in body  # rendered inside the custom site's chrome
    assert 'href="/ops/wurk_django/dashboard/queues/default/"' in body
    assert "/admin/wurk_django" not in body  # every link stays in this site
    assert client.get("/ops/").content.decode().count("/ops/wurk_django/dashboard/") >= 1
    assert client.get("/admin/wurk_django/dashboard/").status_code == 200
