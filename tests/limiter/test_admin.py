"""The admin's Limits page: listing, filter, paging, status, Reset, and the same
permission, CSRF and read-only rules as every other page (ENT-801, DJ-050..052)."""

from __future__ import annotations

import pytest
from django.middleware.csrf import get_token
from django.test import Client

from tests.admin.conftest import BASE, make_user
from tests.support import wurk_settings
from wurk_django import limiter

pytestmark = pytest.mark.django_db

PAGE = BASE + "limits/"


@pytest.fixture
def limiters(redis_db):
    erp = limiter.concurrent("erp", 3)
    stripe = limiter.window("stripe-42", 5, "minute", wait_timeout=0)
    drip = limiter.leaky("drip", 4, "hour")
    with erp.acquire():
        erp.within_limit(lambda: None)
    slot = erp.acquire()
    slot.__enter__()  # one slot stays held
    stripe.within_limit(lambda: None, used=5)
    drip.within_limit(lambda: None)
    return {"erp": erp, "stripe": stripe, "drip": drip}


def rows(response) -> dict[str, dict]:
    return {row["name"]: row for row in response.context["page"].items}


def test_lists_every_limiter_with_its_status(admin_client, limiters):
    """ENT-141: status `{used, limit, reset_at, available}` per type."""
    response = admin_client.get(PAGE)
    assert response.status_code == 200
    found = rows(response)
    assert list(found) == ["drip", "erp", "stripe-42"]  # sorted
    erp, stripe = found["erp"], found["stripe-42"]
    assert (erp["type"], erp["used"], erp["limit"], erp["available"], erp["percent"]) == ("concurrent", 1, 3, True, 33)
    assert dict(erp["counters"])["held"] == 3 and dict(erp["counters"])["immediate"] == 2
    assert (stripe["used"], stripe["limit"], stripe["available"]) == (5, 5, False)
    assert stripe["reset_at"] is not None
    body = response.content.decode()
    assert '<tr data-limiter="stripe-42">' in body and "full" in body
    assert '<meter min="0" max="3" value="1"' in body
    assert 'data-counter="held">held 3<' in body
    assert ">Limits<" in body  # the tab


def test_filter_is_a_case_insensitive_substring_and_pages(admin_client, redis_db):
    for i in range(30):
        limiter.bucket(f"Tenant-{i:02d}", 5, "minute").register()
    limiter.bucket("other", 5, "minute").register()
    found = admin_client.get(PAGE + "?q=tenant-1").context["page"]
    assert [r["name"] for r in found.items] == [f"Tenant-{i}" for i in range(10, 20)]
    first = admin_client.get(PAGE + "?q=TENANT&count=25").context["page"]
    assert first.total == 30 and len(first.items) == 25 and first.pages == 2
    second = admin_client.get(PAGE + "?q=TENANT&count=25&page=2")
    assert [r["name"] for r in second.context["page"].items] == [f"Tenant-{i}" for i in range(25, 30)]
    assert "q=TENANT" in second.content.decode()  # paging links keep the filter


def test_expired_names_are_swept_from_the_list(admin_client, redis_db):
    limiter.window("gone", 1, "second").register()
    limiter.window("kept", 1, "second").register()
    redis_db.delete("lmtr:gone")
    assert list(rows(admin_client.get(PAGE))) == ["kept"]
    assert redis_db.smembers("lmtr-list") == {b"kept"}


def test_reset_button_resets_one_limiter(manager_client, limiters, redis_db):
    assert b'value="reset"' in manager_client.get(PAGE).content
    response = manager_client.post(PAGE, {"action": "reset", "name": "stripe-42", "next": PAGE + "?q=str"})
    assert response.status_code == 302 and response["Location"] == PAGE + "?q=str"
    assert not redis_db.exists("lmtr-w:stripe-42")
    assert redis_db.exists("lmtr:stripe-42") and redis_db.sismember("lmtr-list", "stripe-42")
    assert redis_db.exists("lmtr-cs:erp")  # the others are untouched
    manager_client.post(PAGE, {"action": "reset", "name": "erp"})
    assert not redis_db.exists("lmtr-cs:erp") and not redis_db.exists("lmtr-stats:erp")


def test_reset_without_metadata_deletes_what_state_is_left(manager_client, redis_db):
    redis_db.zadd("lmtr-cs:orphan", {"abc": 1})
    redis_db.hset("lmtr-l:orphan", "level", 3)
    manager_client.post(PAGE, {"action": "reset", "name": "orphan"})
    assert not redis_db.keys("lmtr*orphan*")


def test_reset_refuses_a_bad_name(manager_client, limiters, redis_db):
    response = manager_client.post(PAGE, {"action": "reset", "name": "erp nope"}, follow=True)
    assert b"Unknown action or limiter name" in response.content
    assert redis_db.exists("lmtr-cs:erp")


def test_viewer_sees_the_page_but_no_button_and_cannot_post(client, db, limiters, redis_db):
    client.force_login(make_user("viewer", perms=("view_dashboard",)))
    page = client.get(PAGE)
    assert page.status_code == 200 and b'value="reset"' not in page.content
    assert client.post(PAGE, {"action": "reset", "name": "stripe-42"}).status_code == 403
    assert redis_db.exists("lmtr-w:stripe-42")


def test_anonymous_and_plain_staff_are_kept_out(client, db):
    assert client.get(PAGE).status_code == 302
    client.force_login(make_user("plainstaff"))
    assert client.get(PAGE).status_code == 403


def test_post_without_csrf_token_is_refused(db, limiters, redis_db):
    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(make_user("manager2", perms=("view_dashboard", "manage_jobs")))
    response = csrf_client.post(PAGE, {"action": "reset", "name": "stripe-42"})
    assert response.status_code == 403 and b"CSRF" in response.content
    assert redis_db.exists("lmtr-w:stripe-42")
    token = get_token(csrf_client.get(PAGE).wsgi_request)
    ok = csrf_client.post(PAGE, {"action": "reset", "name": "stripe-42", "csrfmiddlewaretoken": token})
    assert ok.status_code == 302 and not redis_db.exists("lmtr-w:stripe-42")


def test_read_only_hides_the_button_and_refuses_the_post(admin_client, limiters, redis_db):
    with wurk_settings(ADMIN_READ_ONLY=True):
        assert b'value="reset"' not in admin_client.get(PAGE).content
        assert admin_client.post(PAGE, {"action": "reset", "name": "stripe-42"}).status_code == 403
    assert redis_db.exists("lmtr-w:stripe-42")


def test_get_never_resets(manager_client, limiters, redis_db):
    manager_client.get(PAGE + "?action=reset&name=stripe-42")
    assert redis_db.exists("lmtr-w:stripe-42")


def test_empty_page(admin_client):
    assert b"No limiter yet" in admin_client.get(PAGE).content


def test_install_registers_the_page_without_importing_the_admin():
    # A worker run from a bare Config has no app registry: the admin part must not import the
    # admin package (its models need the registry); the page's views load with the URLs.
    import subprocess
    import sys

    code = ("import sys; from wurk_django import admin_pages; from wurk_django.limiter import install; "
            "install.install_admin(); assert 'limits' in admin_pages._pages; "
            "assert 'wurk_django.admin' not in sys.modules and 'django.contrib.admin' not in sys.modules")
    env = {k: v for k, v in __import__("os").environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, cwd=str(__import__("pathlib").Path(__file__).parents[2]))
