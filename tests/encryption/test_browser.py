"""The queue page in headless Chromium: an encrypted job is masked and deleted by digest (ENT-610)."""

from __future__ import annotations

import base64

import pytest

from tests.admin.conftest import BASE, enqueue, job
from tests.admin.test_browser import browser, page  # noqa: F401 - the shared Chromium fixtures
from tests.encryption.jobs import ChargeCard
from tests.support import wait_for, wurk_settings
from wurk_django import encryption

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

KEYS = {"ACTIVE_VERSION": 1, "KEYS": {1: base64.b64encode(bytes(range(32))).decode()}}


def test_masked_row_and_delete_by_digest(page, redis_db):  # noqa: F811
    encryption.disable()
    with wurk_settings(ENCRYPTION=KEYS):
        ChargeCard.perform_async(1, {"number": "4242424242424242"})
        enqueue(redis_db, job("tests.encryption.jobs.ChargeCard", args=[2, {"number": "legacy-9876-5432"}],
                              encrypt=True))
        keep = redis_db.lindex("queue:default", 1)
        page.goto(page.base + BASE + "queues/default/")
        html = page.content()
        assert "4242424242424242" not in html and "legacy-9876-5432" not in html
        rows = page.locator("#wurk-queue-jobs tbody tr")
        assert rows.count() == 2
        assert "[encrypted data]" in rows.nth(0).inner_text()
        rows.nth(0).locator("button", has_text="Delete").click()  # the newest: the legacy cleartext job
        page.wait_for_url(f"**{BASE}queues/default/")
        wait_for(lambda: redis_db.llen("queue:default") == 1, timeout=10, message="the job deleted")
        assert redis_db.lrange("queue:default", 0, -1) == [keep]
