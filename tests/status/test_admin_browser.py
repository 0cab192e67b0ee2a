"""The progress bars update live in a real headless Chromium (issue 47 item 2): on the
Busy page and on a job's status page, a report written to the record after the page
loaded moves the bar; a status page reloads once its job finishes. Skipped without
Chromium or playwright, as tests/admin/test_browser.py is."""

from __future__ import annotations

import pytest

from tests.admin.conftest import BASE, heartbeat, job
from wurk_django import payload
from wurk_django.results import store

sync_api = pytest.importorskip("playwright.sync_api", reason="the playwright package is not installed")
from tests.admin import test_browser as shared  # noqa: E402 - skips this module too without Chromium

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]
browser = shared.browser  # the module's Chromium fixture


@pytest.fixture
def page(browser, live_server):
    context, tab = shared.signed_in(browser, live_server, "ops", lambda dialog: dialog.accept())
    yield tab
    context.close()


def _record(redis_db, jid: str, **fields) -> None:
    store.write(redis_db, jid, {"state": "running", "class": "ResizeJob", "started_at": payload.now_ms(),
                                "worker_ids": ["w1"], "errors": [], **fields}, 600)


def test_a_bar_on_busy_moves_when_the_job_reports(page, redis_db):
    running = job("ResizeJob", track=600)
    _record(redis_db, running["jid"], progress=10, message="reading")
    heartbeat(redis_db, busy=1, work={"t1": running})
    page.goto(page.base + BASE + "busy/")
    bar = page.locator("#wurk-jobs .wurk-progress progress")
    assert bar.evaluate("node => node.value") == 10
    _record(redis_db, running["jid"], progress=70, message="writing")
    page.wait_for_function("document.querySelector('#wurk-jobs .wurk-progress progress').value === 70",
                           timeout=20_000)
    assert page.locator("#wurk-jobs [data-progress-message]").inner_text() == "writing"
    assert page.locator("#wurk-jobs [data-progress-percent]").inner_text() == "70 %"


def test_a_status_page_follows_its_job_to_the_end(page, redis_db):
    jid = payload.new_jid()
    _record(redis_db, jid, progress=30, message="half way there")
    page.goto(page.base + BASE + f"status/{jid}/")
    assert page.locator("#wurk-status-state").get_attribute("data-state") == "running"
    store.write(redis_db, jid, {"state": "complete", "progress": 100, "return_value": "done",
                                "finished_at": payload.now_ms()}, 600)
    page.wait_for_function("document.getElementById('wurk-status-state')"
                           " && document.getElementById('wurk-status-state').dataset.state === 'complete'",
                           timeout=20_000)
    assert page.locator("#wurk-status-result").inner_text() == '"done"'
