"""The Limits page in a real headless Chromium (ENT-801): rows, the bar, the
filter, and a Reset clicked like a person would. Screenshot: artifacts/screenshots/limits.png."""

from __future__ import annotations

import pytest

from tests.admin.conftest import BASE
from tests.admin.test_browser import browser, page, shot  # noqa: F401 (fixtures)
from wurk_django import limiter

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_limits_page_shows_usage_filters_and_resets(page, redis_db):  # noqa: F811
    erp = limiter.concurrent("erp", 3)
    held = erp.acquire()
    held.__enter__()
    erp.within_limit(lambda: None)
    limiter.window("stripe-42", 5, "minute").within_limit(lambda: None, used=5)
    limiter.bucket("mailgun", 10, "day").within_limit(lambda: None, used=4)
    limiter.leaky("drip", 60, "hour").within_limit(lambda: None)
    limiter.points("graphql", 1000, 50).within_limit(lambda: None, estimate=250)

    page.goto(page.base + BASE + "limits/")
    rows = page.locator("#wurk-limits tbody tr[data-limiter]")
    assert rows.count() == 5
    stripe = page.locator('tr[data-limiter="stripe-42"]')
    assert "full" in stripe.locator("[data-available]").inner_text()
    assert stripe.locator("meter").get_attribute("value") == "5"
    assert "held 2" in page.locator('tr[data-limiter="erp"]').inner_text()
    assert page.locator("nav a, .wurk-nav a").filter(has_text="Limits").count() >= 1
    shot(page, "limits")

    page.fill('input[name="q"]', "STRIPE")
    page.click(".wurk-filter button")
    page.wait_for_url("**limits/?q=STRIPE")
    assert rows.count() == 1
    page.locator('tr[data-limiter="stripe-42"] button[value="reset"]').click()  # the confirm dialog is accepted
    page.wait_for_load_state()
    assert "reset" in page.locator(".messagelist, ul.messagelist").inner_text()
    assert page.locator('tr[data-limiter="stripe-42"] meter').get_attribute("value") == "0"
    assert page.url.endswith("limits/?q=STRIPE")  # back where the button was
    assert not redis_db.exists("lmtr-w:stripe-42")
    held.__exit__(None, None, None)
