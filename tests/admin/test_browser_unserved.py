"""Issue 12, item 15, in a real browser: a live worker serving only ``default`` and jobs
waiting in ``reports`` (the README's old example) show the "no worker" marks."""

from __future__ import annotations

from tests.support import wait_for

from .conftest import BASE
from .test_browser import browser, page, pytestmark, shot  # noqa: F401 - shared fixtures and marks


def test_unserved_queue_is_marked_on_the_dashboard_and_queues_page(page, redis_db, worker_factory):  # noqa: F811
    from tests.jobsapp.jobs import RecordJob

    RecordJob.set(queue="reports").perform_async("monthly")
    RecordJob.perform_async("daily")
    worker_factory("-q", "default", "-c", "1")
    wait_for(lambda: redis_db.llen("test:ran") == 1 and redis_db.scard("processes") == 1, timeout=30,
             message="the worker to run the default job")
    page.goto(page.base + BASE)
    alert = page.locator("#wurk-unserved")
    assert alert.is_visible()
    assert "reports" in alert.inner_text() and "default" not in alert.inner_text()
    shot(page, "dashboard-unserved")
    page.click('#wurk-unserved a[data-unserved="reports"]')
    page.wait_for_url("**/queues/reports/")
    page.goto(page.base + BASE + "queues/")
    assert page.locator('tr[data-queue="reports"] [data-unserved]').is_visible()
    assert page.locator('tr[data-queue="default"] [data-unserved]').count() == 0
    shot(page, "queues-unserved")
