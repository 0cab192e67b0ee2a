"""Redis down: every Wurk page and JSON endpoint answers 503 naming the server (without
its password) and the reason, never Django's 500 page (issue 45 item 4).

The URLs come from Django's resolver, which builds them from the admin page registry,
so a feature's page is walked too; Redis is a real port of ``WURK_TEST_PORTS`` that
nobody listens on.
"""

from __future__ import annotations

import json
import re

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import NoReverseMatch, reverse

from tests.admin.test_access_table import resolved
from tests.local_redis import free_port
from wurk_django.admin_pages import pages

pytestmark = pytest.mark.django_db


@pytest.fixture
def redis_down(monkeypatch):
    from wurk_django.redis import connection, errors

    monkeypatch.setattr(errors, "sleep", lambda _s: None)  # the connect retries, without their waits
    port = free_port()
    url = f"redis://:hunter2@127.0.0.1:{port}/0"
    with override_settings(WURK={**settings.WURK, "REDIS_URL": url}):
        connection.reset()
        yield f"redis://127.0.0.1:{port}/0"
    connection.reset()


#: Path parameters that take one of a few words.
CHOICES = {"kind": "retries", "action": "delete", "key": "1700000000.5-0123456789abcdef01234567",
           "lid": "c808c20fc6d4222e"}


def _reverse(name: str, route: str) -> str:
    params = re.findall(r"<(\w+)>", route)
    for value in ("default", "1", "1700000000.0-abc"):
        kwargs = {p: CHOICES.get(p, value) for p in params}
        try:
            return reverse(f"admin:{name}", kwargs=kwargs)
        except NoReverseMatch:
            continue
    raise AssertionError(f"cannot build a URL for {name} ({route})")


def test_every_page_and_endpoint_says_redis_is_unreachable(admin_client, redis_down):
    walked = set()
    wrong = []
    for name, route, view in resolved():
        url = _reverse(name, route)
        walked.add(name)
        if name.endswith("page_changelist"):
            continue  # an index entry: a redirect to its page, no Redis read
        json_endpoint = not hasattr(view, "wurk_changes_jobs")  # WurkAdmin.api, not .wrap
        for method in [m for m in view.wurk_methods if m != "HEAD"]:
            response = admin_client.generic(method, url)
            where = f"{method} {url} ({name})"
            assert response.status_code != 500, where
            if method == "POST" and response.status_code != 503:
                continue  # refused the empty form before reading Redis (a redirect back)
            if response.status_code != 503:
                wrong.append((where, response.status_code))
                continue
            body = response.content.decode()
            if json_endpoint:
                assert response["Content-Type"] == "application/json", where
                message = json.loads(body)["message"]
            else:
                assert "text/html" in response["Content-Type"], where
                message = body
            assert f"Redis unreachable at {redis_down}: " in message, where
            assert "Connection refused" in message or "connect" in message.lower(), where
            assert "hunter2" not in body, where
            assert "no-store" in response["Cache-Control"], where
    assert not wrong, "\n".join(map(str, wrong))
    assert {p.url_name for p in pages()} <= walked  # every registered page was walked


def test_a_page_outside_wurk_is_left_alone(admin_client, redis_down):
    # Django's own admin index needs no Redis: it still answers.
    assert admin_client.get(reverse("admin:index")).status_code == 200


def test_the_shown_url_has_no_password():
    from wurk_django.admin.redis_down import shown_url

    assert shown_url("redis://:pw@host:6380/2") == "redis://host:6380/2"
    assert shown_url("rediss://user:pw@[::1]:6380/0?x=1") == "rediss://user@[::1]:6380/0?x=1"
    assert shown_url("redis://host/0") == "redis://host/0"
    assert shown_url("unix:///tmp/redis.sock?db=1") == "unix:///tmp/redis.sock?db=1"
