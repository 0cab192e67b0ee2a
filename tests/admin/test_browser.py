"""The dashboard in a real headless Chromium against a live server and a real
worker process (DJ-050..DJ-054). Screenshots land in artifacts/screenshots/.

Needs Debian's ``chromium`` (/usr/bin/chromium) and the ``playwright`` Python
package; without either, every test here is skipped with the reason.
"""

from __future__ import annotations

import os
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.support import ROOT, wait_for
from wurk_django import payload

from .conftest import BASE, add_to_set, failed, make_user

CHROMIUM = os.environ.get("WURK_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SHOTS = ROOT / "artifacts" / "screenshots"

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
if not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM)):
    pytest.skip(f"no Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


@pytest.fixture(scope="module")
def browser():
    # Playwright's sync API keeps an event loop on this thread; Django's ORM calls
    # in the test body are still plain synchronous code.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def signed_in(browser, live_server, username: str, on_dialog, **context_options):
    """A new browser context and a tab signed in to the admin as a new superuser
    ``username`` (password ``<username>-password-1``), on the Wurk dashboard; dialogs go
    to ``on_dialog``. The caller closes the context."""
    password = f"{username}-password-1"
    make_user(username, superuser=True, password=password)
    context = browser.new_context(viewport={"width": 1280, "height": 900}, **context_options)
    context.set_default_timeout(15_000)
    tab = context.new_page()
    tab.on("dialog", on_dialog)
    tab.goto(f"{live_server.url}/admin/login/?next={BASE}")
    tab.fill("#id_username", username)
    tab.fill("#id_password", password)
    tab.click("input[type=submit]")
    tab.wait_for_url(f"**{BASE}")
    tab.base = live_server.url  # type: ignore[attr-defined]
    return context, tab


@pytest.fixture
def page(browser, live_server):
    context, tab = signed_in(browser, live_server, "ops", lambda dialog: dialog.accept())
    yield tab
    context.close()


def shot(tab, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    tab.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def stat(tab, name: str) -> int:
    return int(tab.locator(f'#wurk-summary [data-stat="{name}"]').inner_text())


def ran(redis_db) -> list[str]:
    return [v.decode() for v in redis_db.lrange("test:ran", 0, -1)]


def push_record_jobs(*values) -> None:
    from tests.jobsapp.jobs import RecordJob

    for value in values:
        RecordJob.perform_async(value)


def test_dashboard_counts_follow_a_real_worker(page, redis_db, worker_factory):
    push_record_jobs(*range(6))
    page.goto(page.base + BASE)
    assert stat(page, "enqueued") == 6
    page.select_option("#wurk-poll-interval", "2")
    worker_factory("-q", "default", "-c", "2")
    wait_for(lambda: len(ran(redis_db)) == 6, timeout=30, message="six jobs to run")
    # The worker adds to stat:processed at its heartbeat; the page picks it up by polling.
    page.wait_for_function("Number(document.querySelector('#wurk-summary [data-stat=processed]').textContent) >= 6",
                           timeout=40_000)
    assert stat(page, "enqueued") == 0
    assert int(page.locator('[data-stat="today_processed"]').inner_text()) >= 6
    assert page.locator("#wurk-live-chart svg polyline").count() == 2
    assert page.locator("[data-line-chart] svg polyline").count() == 2
    shot(page, "dashboard")

    page.emulate_media(color_scheme="dark")
    page.reload()
    background = page.evaluate("getComputedStyle(document.querySelector('.wurk-summary > div')).backgroundColor")
    assert background not in ("rgb(255, 255, 255)", "rgba(0, 0, 0, 0)")
    shot(page, "dashboard-dark")
    page.emulate_media(color_scheme="light")

    page.goto(page.base + BASE + "busy/")
    assert page.locator("#wurk-processes tbody tr[data-identity]").count() == 1
    assert "default" in page.locator("#wurk-processes").inner_text()
    shot(page, "busy")

    page.goto(page.base + BASE + "queues/")
    shot(page, "queues")

    # Something on every remaining page for the screenshots.
    from tests.metrics.test_query import sidekiq_flush

    now = datetime.now(UTC)
    sidekiq_flush(redis_db, now, {"ReportJob": {"p": 12, "f": 2, "ms": 5400}, "MailJob": {"p": 40, "ms": 800}},
                  durations={"ReportJob": [90, 300, 800, 2400] * 3, "MailJob": [15] * 40})
    add_to_set(redis_db, "schedule", {"class": "ReportJob", "args": [2025, "monthly"], "queue": "default",
                                      "jid": payload.new_jid(), "created_at": payload.now_ms()})
    add_to_set(redis_db, "retry", failed("ReportJob", args=[7, {"region": "eu"}]))
    for name, path in (("scheduled", "scheduled/"), ("retries", "retries/"), ("metrics", "metrics/"),
                       ("metrics-job", "metrics/ReportJob/")):
        page.goto(page.base + BASE + path)
        shot(page, name)
    assert page.locator("[data-bar-chart] svg rect.bar").count() == 26


def test_retry_a_dead_job_from_the_ui_and_see_it_run(page, redis_db, worker_factory):
    item = {"class": "tests.jobsapp.jobs.RecordJob", "args": ["back-from-the-dead"], "queue": "default",
            "jid": "deadbeef0000000000000001", "retry": True, "retry_count": 3, "created_at": payload.now_ms(),
            "error_class": "RuntimeError", "error_message": "gave up", "failed_at": payload.now_ms()}
    add_to_set(redis_db, "dead", item, at=time.time() - 30)
    worker_factory("-q", "default", "-c", "1")

    page.goto(page.base + BASE + "dead/")
    rows = page.locator("#wurk-set tbody tr")
    assert rows.count() == 1
    assert "back-from-the-dead" in rows.first.inner_text()
    shot(page, "dead")
    rows.first.locator("a").first.click()
    assert "RuntimeError: gave up" in page.locator("#wurk-error").inner_text()
    assert "deadbeef0000000000000001" in page.locator("#wurk-fields").inner_text()
    shot(page, "dead-job")
    page.click("button[value=retry]")
    page.wait_for_url(f"**{BASE}dead/")
    assert "Retry now: 1 job" in page.locator(".messagelist").inner_text()
    wait_for(lambda: "back-from-the-dead" in ran(redis_db), timeout=20, message="the retried job to run")
    assert redis_db.zcard("dead") == 0


def test_pausing_a_queue_stops_fetching(page, redis_db, worker_factory):
    push_record_jobs("warm-up")
    worker_factory("-q", "default", "-c", "2")
    wait_for(lambda: ran(redis_db) == ["warm-up"], timeout=20, message="the first job")

    page.goto(page.base + BASE + "queues/")
    row = page.locator('#wurk-queues tr[data-queue="default"]')
    row.locator("button[value=pause]").click()
    page.wait_for_url(f"**{BASE}queues/")
    assert redis_db.smembers("paused") == {b"default"}
    assert "paused" in page.locator('#wurk-queues tr[data-queue="default"]').inner_text()
    # A fetch already blocking when the pause landed may still take one job; let it time out.
    time.sleep(4)

    push_record_jobs("held-1", "held-2", "held-3")
    time.sleep(6)  # three fetch cycles and a pause-cache refresh
    assert redis_db.llen("queue:default") == 3
    assert ran(redis_db) == ["warm-up"]
    page.reload()
    assert page.locator('#wurk-queues tr[data-queue="default"] [data-size]').inner_text() == "3"
    shot(page, "queues-paused")

    page.locator('#wurk-queues tr[data-queue="default"] button[value=unpause]').click()
    page.wait_for_url(f"**{BASE}queues/")
    assert redis_db.smembers("paused") == set()
    wait_for(lambda: len(ran(redis_db)) == 4, timeout=20, message="the held jobs to run after unpausing")
    assert sorted(ran(redis_db)[1:]) == ["held-1", "held-2", "held-3"]


def test_bulk_retry_all_with_confirmation(page, redis_db):
    for i in range(3):
        add_to_set(redis_db, "retry", failed("MailJob", jid=f"{i:024x}"), at=time.time() + 100 + i)
    page.goto(page.base + BASE + "retries/")
    page.click("text=Retry all")
    assert "3 right now" in page.locator(".wurk-confirm").inner_text()
    assert redis_db.zcard("retry") == 3  # the confirmation page changed nothing
    shot(page, "retries-confirm")
    page.click("#wurk-confirm")
    page.wait_for_url(f"**{BASE}retries/")
    assert redis_db.zcard("retry") == 0
    assert redis_db.llen("queue:default") == 3


def test_wide_layout_keeps_tabs_on_one_row_and_long_errors_wrap(page, redis_db):
    # Issue 29 item 7: at 1400 px the tabs wrapped onto a second row, and an error with no
    # spaces pushed the Dead table off the page.
    page.set_viewport_size({"width": 1400, "height": 900})
    add_to_set(redis_db, "dead", failed("shop.jobs.VeryLongClassNameForTesting", error_message="E" * 600),
               at=time.time())
    page.goto(page.base + BASE + "dead/")
    tops = page.evaluate("[...document.querySelectorAll('.wurk-tabs > *')].map(e => e.getBoundingClientRect().top)")
    assert len(set(tops)) == 1, f"tabs on {len(set(tops))} rows: {tops}"
    right = page.evaluate("(() => { const cell = document.querySelector('td.wurk-error');"
                          " const box = cell.closest('.wurk-scroll') || cell.closest('table').parentElement;"
                          " return [cell.getBoundingClientRect().right, box.getBoundingClientRect().right]; })()")
    assert right[0] <= right[1] + 1, f"the error cell ends at {right[0]}, past its container at {right[1]}"
    shot(page, "dead-wide")
