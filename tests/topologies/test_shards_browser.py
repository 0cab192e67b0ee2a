"""The admin's shard selector in a real headless Chromium (issue 18 item 4, PRO-361)."""

from __future__ import annotations

import pytest

from tests.admin.conftest import BASE, enqueue, job
from tests.admin.test_browser import browser, page, shot, stat  # noqa: F401  (fixtures)
from tests.redis_servers import TCPRedis
from tests.support import wurk_settings
from wurk_django.redis import connection

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def shard_a(redis_db):
    server = TCPRedis().start()
    client = server.client(4)
    with wurk_settings(SHARDS={"a": server.url(4)}):
        yield client
    client.close()
    connection.reset()
    server.stop()


def test_choosing_a_shard_shows_its_queues_and_counts(shard_a, page, redis_db):  # noqa: F811
    enqueue(redis_db, job(args=["on default"]))
    enqueue(shard_a, job(args=["one"], queue="mail"), job(args=["two"], queue="mail"), job(args=["3"], queue="mail"))
    page.goto(page.base + BASE + "queues/")
    assert stat(page, "enqueued") == 1
    assert page.locator("#wurk-shard").input_value() == "default"
    page.select_option("#wurk-shard", "a")
    page.click("form.wurk-shard button[type=submit]")
    page.wait_for_url(f"**{BASE}queues/")
    assert page.locator("#wurk-shard").input_value() == "a"
    assert stat(page, "enqueued") == 3
    assert "mail" in page.locator(".wurk").inner_text()
    shot(page, "shard-selector")
    page.goto(page.base + BASE)  # the choice sticks to the session
    assert page.locator("#wurk-shard").input_value() == "a" and stat(page, "enqueued") == 3
