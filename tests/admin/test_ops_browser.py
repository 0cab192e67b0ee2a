"""Issue 17's admin rough edges seen in a real Chromium, with real worker processes.
Screenshots land in artifacts/screenshots/ (ops-*.png)."""

from __future__ import annotations

import time

import django
import pytest

from tests.support import wait_for
from wurk_django import payload

from .conftest import BASE, add_to_set, failed
from .test_browser import browser, page, ran, shot  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_busy_state_and_dashboard_history_follow_a_real_worker(page, redis_db, worker_factory):  # noqa: F811
    from tests.jobsapp.jobs import RecordJob

    page.goto(page.base + BASE)
    page.select_option("#wurk-poll-interval", "2")
    worker_factory("-q", "default", "-c", "2")
    for i in range(7):
        RecordJob.perform_async(i)
    wait_for(lambda: len(ran(redis_db)) == 7, timeout=30, message="seven jobs")
    page.wait_for_function("Number(document.querySelector('[data-stat=today_processed]').textContent) >= 7",
                           timeout=40_000)
    today = int(page.locator('[data-stat="today_processed"]').inner_text())
    total = int(page.locator('[data-history-total="processed"]').inner_text())
    base = int(page.locator("#wurk-history-totals").get_attribute("data-base-processed"))
    assert total == base + today  # the N-day total follows the live number
    last_point = page.evaluate("(() => { const d = JSON.parse(document.getElementById('wurk-history-data')"
                               ".textContent); return d.labels[d.labels.length - 1]; })()")
    assert last_point == time.strftime("%Y-%m-%d", time.gmtime())
    uptime = page.locator('[data-stat="uptime"]').inner_text()
    assert uptime and uptime != "0 days"
    shot(page, "ops-dashboard-history")

    page.goto(page.base + BASE + "busy/")
    badges = page.locator("#wurk-processes tbody tr[data-identity] td.wurk-state .wurk-badge").all_inner_texts()
    assert badges[0] == "running" and "0.1.0" not in badges  # the state, not the version (a lone worker also leads)
    shot(page, "ops-busy-state")


def test_error_column_stays_readable_at_800px(page, redis_db):  # noqa: F811
    long_error = "Connection refused while talking to the payment provider at https://pay.example.com/v2/charge"
    for i in range(3):
        add_to_set(redis_db, "retry", failed("billing.jobs.ChargeCustomerJob", args=[1000 + i, {"currency": "EUR",
                   "amount": 1999, "customer": f"cus_{i:012d}"}], error_message=long_error),
                   at=time.time() + 60 + i)
    page.set_viewport_size({"width": 800, "height": 900})
    page.goto(page.base + BASE + "retries/")
    width = page.evaluate("document.querySelector('#wurk-set tbody td.wurk-error').getBoundingClientRect().width")
    assert width >= 150  # one letter per line was about 10 px wide
    shot(page, "ops-retries-800px")


def test_poll_mode_refreshes_a_list_page(page, redis_db):  # noqa: F811
    page.goto(page.base + BASE + "queues/?poll=true")
    assert page.locator("#wurk-live-toggle").inner_text() == "Live: on"
    redis_db.sadd("queues", "reports")
    redis_db.lpush("queue:reports", payload.dumps({"class": "ReportJob", "args": [], "jid": payload.new_jid(),
                                                   "created_at": payload.now_ms()}))
    page.wait_for_selector('#wurk-queues tr[data-queue="reports"]', timeout=15_000)  # no reload by us
    assert int(page.locator("#wurk-root").get_attribute("data-polls")) >= 1
    shot(page, "ops-queues-poll")


@pytest.mark.skipif(django.VERSION < (6, 0), reason="Django's CSP middleware arrived in 6.0")
def test_pages_work_under_a_strict_csp(page, redis_db, settings):  # noqa: F811
    from django.utils.csp import CSP

    settings.SECURE_CSP = {"default-src": [CSP.SELF], "script-src": [CSP.NONCE, CSP.STRICT_DYNAMIC],
                           "style-src": [CSP.SELF, CSP.NONCE], "img-src": [CSP.SELF, "data:"],
                           "object-src": [CSP.NONE], "base-uri": [CSP.NONE]}
    violations: list[str] = []
    page.on("console", lambda msg: violations.append(msg.text) if "Content Security Policy" in msg.text else None)
    redis_db.set("stat:processed:" + time.strftime("%Y-%m-%d", time.gmtime()), 3)
    for path in ("", "busy/", "queues/?poll=true", "retries/", "tasks/", "metrics/"):
        response = page.goto(page.base + BASE + path)
        assert "'nonce-" in response.headers["content-security-policy"]
    page.goto(page.base + BASE)
    # wurk.js ran under the policy (generous timeouts: the machine may be busy).
    page.wait_for_selector("[data-line-chart] svg polyline", timeout=30_000)
    # A selector, not wait_for_function: Playwright evaluates a string predicate with eval()
    # inside the page while it polls, which this very policy forbids (the test then failed
    # whenever the first poll had not yet landed). wurk.js sets data-polls on its first poll.
    page.wait_for_selector("#wurk-root[data-polls]", state="attached", timeout=30_000)
    assert violations == []
    shot(page, "ops-dashboard-csp")


def test_tasks_page_with_a_real_worker(page, redis_db, worker_factory, settings):  # noqa: F811
    from wurk_django.tasks.compat import AVAILABLE as TASKS_AVAILABLE

    if not TASKS_AVAILABLE:
        pytest.skip("neither django.tasks (Django 6+) nor the django-tasks backport")
    from tests.tasks import sample
    from tests.tasks.conftest import WURK_TASKS
    from tests.tasks.test_worker_tasks import TASK_MODULES

    settings.TASKS = WURK_TASKS
    ok = sample.add.enqueue(2, 40)
    bad = sample.fail.enqueue("no such customer")
    page.goto(page.base + BASE + "queues/default/")
    assert "add(2, 40)" in page.locator("#wurk-queue-jobs").inner_text()
    shot(page, "ops-queue-task-call")
    page.locator(f'#wurk-queue-jobs a[href$="/tasks/{ok.id}/"]').click()
    assert page.locator("#wurk-task-status").inner_text() == "READY"

    # tests.tasks is not an installed app: the worker may import its tasks only when told to.
    worker_factory("-q", "default", "-c", "2", env=TASK_MODULES)
    wait_for(lambda: sample.add.get_result(ok.id).is_finished, timeout=30, message="the add task")
    wait_for(lambda: redis_db.zcard("retry") == 1, timeout=30, message="the failing task in retry")
    page.goto(page.base + BASE + "tasks/")
    rows = page.locator("#wurk-tasks tbody tr")
    assert rows.count() == 2
    text = page.locator("#wurk-tasks").inner_text()
    assert "add(2, 40)" in text and "SUCCESSFUL" in text and "fail('no such customer')" in text
    shot(page, "ops-tasks")
    page.locator(f'#wurk-tasks tr[data-id="{ok.id}"] a').first.click()
    assert page.locator("#wurk-task-return").inner_text() == "42"
    shot(page, "ops-task-detail")

    # From the retry set's job page to its task result and on to where the job waits.
    page.goto(page.base + BASE + "retries/")
    page.locator("#wurk-set tbody tr a").first.click()
    page.locator("#wurk-job-task").click()
    assert "ValueError" in page.locator("h3").first.inner_text()
    assert page.locator("#wurk-task-job").inner_text() == "In the retry set"
    shot(page, "ops-task-failed")
    del bad


def test_historical_page_draws_its_charts(page, redis_db):  # noqa: F811
    from datetime import UTC, datetime

    from tests.metrics.test_query import sidekiq_flush
    from wurk_django.api import Deploy
    from wurk_django.history.rollup import rollup_queues, rollup_throughput

    now = time.time()
    for minutes_ago, count in ((14, 30), (9, 55), (5, 20), (2, 70)):
        moment = datetime.fromtimestamp((now // 60 - minutes_ago) * 60, tz=UTC)
        sidekiq_flush(redis_db, moment, {"ReportJob": {"p": count, "f": count // 10, "ms": count * 40}})
    Deploy().mark("v2.0 deploy", at=datetime.fromtimestamp(now - 9 * 60, tz=UTC))
    rollup_throughput(redis_db)
    for name, size in (("default", 12), ("mail", 4)):
        redis_db.sadd("queues", name)
        for _ in range(size):
            redis_db.lpush(f"queue:{name}", payload.dumps({"class": "ReportJob", "args": [], "jid": payload.new_jid(),
                                                           "enqueued_at": payload.now_ms() - 5000}))
    rollup_queues(redis_db)
    page.goto(page.base + BASE + "history/")
    assert "175 processed" in page.locator("#wurk-history-sum").inner_text()
    assert page.locator('[data-line-chart="wurk-history-throughput"] svg polyline').count() == 2
    assert page.locator('[data-line-chart="wurk-history-throughput"] svg line.mark').count() == 1
    assert page.locator('[data-line-chart="wurk-history-sizes"] svg polyline').count() == 2
    shot(page, "ops-historical")


def test_profiles_pages(page, redis_db):  # noqa: F811
    from tests.profiling.test_profiling import busy_function, napping_function
    from wurk_django.conf import get_config
    from wurk_django.middleware import server_chain

    job = {"class": "reports.jobs.MonthlyReportJob", "args": [2025], "jid": "f" * 24, "profile": "monthly"}
    server_chain(get_config()).invoke((None, job, "default"), lambda: (napping_function(), busy_function()))
    page.goto(page.base + BASE + "profiles/")
    assert page.locator("#wurk-profiles tbody tr[data-key]").count() == 1
    shot(page, "ops-profiles")
    page.locator("#wurk-profiles tbody tr a").first.click()
    assert "napping_function" in page.locator("#wurk-profile-top").inner_text()
    shot(page, "ops-profile")
