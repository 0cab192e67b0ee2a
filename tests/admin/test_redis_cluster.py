"""A Redis Cluster (issue 46, stage 1): every Wurk page and JSON endpoint answers 503
saying that the pages do not support a cluster yet, never Django's 500 page nor a
raw ``MovedError``; walked as in test_redis_down, against a real cluster."""

from __future__ import annotations

import json

import pytest
from django.conf import settings
from django.test import override_settings

from tests.admin.test_access_table import resolved
from tests.admin.test_redis_down import _reverse
from wurk_django.admin_pages import pages
from wurk_django.redis import connection

pytestmark = pytest.mark.django_db


@pytest.fixture
def on_cluster(redis_cluster):
    with override_settings(WURK={**settings.WURK, "REDIS_URL": redis_cluster.url(0)}):
        connection.reset()
        yield redis_cluster
    connection.reset()


def test_every_page_and_endpoint_says_a_cluster_is_not_supported_yet(admin_client, on_cluster):
    walked, wrong = set(), []
    for name, route, view in resolved():
        url = _reverse(name, route)
        walked.add(name)
        if name.endswith("page_changelist"):
            continue  # an index entry: a redirect to its page, no Redis read
        json_endpoint = not hasattr(view, "wurk_changes_jobs")
        for method in [m for m in view.wurk_methods if m != "HEAD"]:
            response = admin_client.generic(method, url)
            where = f"{method} {url} ({name})"
            assert response.status_code != 500, where
            if method == "POST" and response.status_code != 503:
                continue  # refused the empty form before reading Redis
            if response.status_code != 503:
                wrong.append((where, response.status_code))
                continue
            body = response.content.decode()
            if json_endpoint:
                reply = json.loads(body)
                assert reply["error"] == "redis_cluster", where
                message = reply["message"]
            else:
                message = body
            assert "not supported on a Redis Cluster yet" in message and "cluster_enabled:1" in message, where
    assert not wrong, "\n".join(map(str, wrong))
    assert {p.url_name for p in pages()} <= walked


def test_the_page_title_is_translated(admin_client, on_cluster):
    from tests.admin.conftest import BASE

    admin_client.defaults["HTTP_ACCEPT_LANGUAGE"] = "fr"
    try:
        response = admin_client.get(BASE + "queues/default/")
    finally:
        admin_client.defaults["HTTP_ACCEPT_LANGUAGE"] = "en"
    assert response.status_code == 503
    assert "<title>Redis Cluster n&#x27;est pas encore pris en charge" in response.content.decode()
