"""The Batches pages in a real headless Chromium, with a real worker draining the batch
while the batch page polls its progress. Screenshots land in artifacts/screenshots/."""

from __future__ import annotations

import json

import pytest

from tests.admin.conftest import BASE
from tests.admin.test_browser import browser, page, shot  # noqa: F401  (fixtures)
from tests.jobsapp.batch_jobs import Callbacks, FailOnce, SlowMark
from tests.support import wait_for
from wurk_django.batch import Batch, Status

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_batch_progress_follows_a_real_worker(page, redis_db, worker_factory):  # noqa: F811
    others = []
    for i in range(3):
        other = Batch()
        other.description = f"Nightly report {i}"
        other.tags = ["nightly"]
        with other.jobs():
            SlowMark.perform_in(3600, i)
        others.append(other)
    batch = Batch()
    batch.description = "Import 12 rows"
    batch.on("success", Callbacks, {"tag": "import"})
    with batch.jobs():
        for i in range(12):
            SlowMark.perform_async(i, 0.4)
        FailOnce.perform_async("browser")

    page.goto(page.base + BASE + "batches/")
    rows = page.locator("#wurk-batches tbody tr[data-bid]")
    assert rows.count() == 4
    assert batch.bid in rows.first.inner_text() and "Import 12 rows" in rows.first.inner_text()
    page.fill("input[name=q]", "nightly report 1")
    page.click("form[role=search] button")
    # The click only starts the search's page load: count the rows once it has loaded.
    page.wait_for_url("**/batches/?q=nightly+report+1*")
    assert page.locator("#wurk-batches tbody tr[data-bid]").count() == 1
    assert others[1].bid in page.locator("#wurk-batches tbody").inner_text()
    page.goto(page.base + BASE + "batches/")
    shot(page, "batches")

    page.locator(f'#wurk-batches tr[data-bid="{batch.bid}"] a').click()
    page.wait_for_url(f"**/batches/{batch.bid}/")
    assert page.locator('[data-batch="total"]').inner_text() == "13"
    assert page.locator('[data-batch="pending"]').inner_text() == "13"
    env = {"WURK_TEST_EXTRA": json.dumps({"POLL_INTERVAL_AVERAGE": 1})}
    worker_factory("-q", "default", "-c", "3", env=env)
    # The page polls the status JSON: the bar moves without a reload.
    page.wait_for_function("document.querySelector('[data-batch=progress]').value > 0 && "
                           "document.querySelector('[data-batch=progress]').value < 100", timeout=30_000)
    shot(page, "batch-running")
    wait_for(lambda: Status(batch.bid).success, timeout=60, message="the batch to succeed")
    page.wait_for_function("document.querySelector('[data-batch=state]').textContent === 'success'",
                           timeout=15_000)
    assert page.locator('[data-batch="pending"]').inner_text() == "0"
    assert page.locator('[data-batch="percent"]').inner_text() == "100"
    page.reload()
    callbacks = page.locator("#wurk-batch-callbacks").inner_text()
    assert "success" in callbacks and "not yet" not in callbacks
    shot(page, "batch")
