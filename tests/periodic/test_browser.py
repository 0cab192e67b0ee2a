"""The Periodic page in a real headless Chromium, with a real worker leading and firing
(ENT-802, ENT-804). Screenshot: artifacts/screenshots/periodic*.png."""

from __future__ import annotations

import json
import time

import pytest

from tests.admin.conftest import BASE
from tests.admin.test_browser import browser, page, shot  # noqa: F401  (fixtures)
from tests.periodic.test_processes import LEADER, SPEED
from tests.support import wait_for

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

LOOPS = [
    {"cron": "* * * * *", "job": "tests.jobsapp.jobs.CronRecordJob", "args": ["browser"], "label": "every minute"},
    {"cron": "0 4 * * *", "job": "tests.jobsapp.jobs.RecordJob", "args": ["nightly"], "queue": "default",
     "tz": "Asia/Tokyo"},
]


def test_periodic_page_with_a_live_leader(page, redis_db, worker_factory):  # noqa: F811
    env = {"WURK_TEST_EXTRA": json.dumps({"LEADER": LEADER, "PERIODIC": LOOPS}),
           "WURK_TEST_CLOCK": f"{time.time():.3f},{SPEED}"}
    worker = worker_factory("-c", "2", env=env)
    wait_for(lambda: redis_db.get("dear-leader"), timeout=30, message="the worker to lead")
    wait_for(lambda: redis_db.scard("periodic") == 2, timeout=10, message="the loops to be registered")
    wait_for(lambda: redis_db.llen("test:cron") >= 1, timeout=30, message="the per-minute loop to fire")

    page.goto(page.base + BASE + "periodic/")
    assert str(worker.pid) in page.locator("#wurk-leader").inner_text()
    rows = page.locator("#wurk-periodic tbody tr[data-lid]")
    assert rows.count() == 2
    minute = page.locator("#wurk-periodic tbody tr", has_text="CronRecordJob")
    assert "every minute" in minute.inner_text()
    assert "never" not in minute.locator("td.wurk-last").inner_text()
    nightly = page.locator("#wurk-periodic tbody tr", has_text="tests.jobsapp.jobs.RecordJob")
    assert "every day at 04:00" in nightly.inner_text() and "Asia/Tokyo" in nightly.inner_text()
    assert "JST" in nightly.locator("td.wurk-next").inner_text()
    shot(page, "periodic")

    # Pause the per-minute loop from the page: it stops firing, and says so.
    minute.get_by_role("button", name="Pause").click()
    page.wait_for_load_state()
    minute = page.locator("#wurk-periodic tbody tr", has_text="CronRecordJob")
    assert "paused" in minute.inner_text()
    lid = minute.get_attribute("data-lid")
    assert redis_db.hget(f"loops:{lid}", "paused") == b"1"
    fired = redis_db.llen(f"loop-history:{lid}")
    time.sleep(2.5 * 60 / SPEED)  # two and a half of the test clock's minutes
    assert redis_db.llen(f"loop-history:{lid}") == fired

    # Enqueue now runs the nightly job at once, and leaves its history empty.
    nightly = page.locator("#wurk-periodic tbody tr", has_text="tests.jobsapp.jobs.RecordJob")
    nightly.get_by_role("button", name="Enqueue now").click()
    page.wait_for_load_state()
    assert "Enqueued" in page.locator(".messagelist").inner_text()
    wait_for(lambda: b"nightly" in redis_db.lrange("test:ran", 0, -1), timeout=15, message="the nightly job to run")

    page.goto(page.base + BASE + f"periodic/{lid}/")
    assert page.locator("#wurk-periodic-history tbody tr").count() == fired
    shot(page, "periodic-history")
