"""The admin's layout on this Django, in a real Chromium (issue 45 item 2): the breadcrumbs sit
in the admin's own breadcrumb bar, the sidebar marks the current Wurk page (not "Dashboard" on
every one), and at 390 px (a phone) no page is wider than the screen and no button is cut off.

Layout facts read from the page's boxes, not pixels. CI runs this file on Django 5.2 and 6.1,
whose admins write different breadcrumb markup. Screenshots land in artifacts/screenshots/
(layout-<django>-*.png).
"""

from __future__ import annotations

import time

import django
import pytest

from wurk_django import payload

from .conftest import BASE, add_to_set, failed, heartbeat, job
from .test_browser import browser, page, shot  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

VERSION = f"{django.VERSION[0]}{django.VERSION[1]}"

BREADCRUMBS = """(() => {
  const bar = document.querySelector('.breadcrumbs');
  const box = bar.getBoundingClientRect();
  const style = getComputedStyle(bar);
  const links = [...bar.querySelectorAll('a')].map(a => a.getBoundingClientRect());
  // A numbered list shows its markers only on items displayed as list items.
  const items = [...bar.querySelectorAll('li')].map(li => getComputedStyle(li))
    .map(s => s.display === 'list-item' ? s.listStyleType : 'none');
  return {background: style.backgroundColor, top: box.top, bottom: box.bottom, left: box.left, right: box.right,
          header: document.querySelector('#header').getBoundingClientRect().bottom,
          inside: links.every(r => r.top >= box.top - 1 && r.bottom <= box.bottom + 1
                                   && r.left >= box.left - 1 && r.right <= box.right + 1),
          links: links.length, numbered: items.filter(t => t !== 'none').length};
})()"""

OVERFLOW = """(() => {
  const width = window.innerWidth;
  const cut = [...document.querySelectorAll('#content button, #content .button, #content input[type=submit]')]
    .filter(b => b.offsetParent !== null)
    .map(b => [b.textContent.trim() || b.value, b.getBoundingClientRect()])
    .filter(([, r]) => r.left < -1 || r.right > width + 1)
    .map(([text, r]) => `${text} ${Math.round(r.left)}..${Math.round(r.right)}`);
  const wrapped = [...document.querySelectorAll('#content time')]
    .filter(t => t.offsetParent !== null && t.getClientRects().length > 1).map(t => t.textContent);
  return {scroll: document.documentElement.scrollWidth, width, cut, wrapped};
})()"""


@pytest.fixture
def filled(redis_db):
    """Something on every page: a busy process with a running job, jobs in every set, a batch
    and a workflow whose second step has not started."""
    from tests.jobsapp.workflow_jobs import Add
    from wurk_django.batch import Batch
    from wurk_django.workflow import chain

    running = job("billing.jobs.ChargeCustomerJob", args=[1042, {"currency": "EUR", "customer": "cus_000000001"}])
    heartbeat(redis_db, "web-7f9c6d-abcde.internal:4242:abc123", busy=1, work={"t1x": running})
    for i in range(3):
        add_to_set(redis_db, "retry", failed("billing.jobs.ChargeCustomerJob", args=[1000 + i, {"amount": 1999}],
                                             error_message="Connection refused by https://pay.example.com/v2"),
                   at=time.time() + 60 + i)
        add_to_set(redis_db, "dead", failed("shop.jobs.SendInvoiceJob"), at=time.time() - 60 - i)
        add_to_set(redis_db, "schedule", job("ReportJob", args=[2026, "monthly"]), at=time.time() + 600 + i)
    batch = Batch()
    batch.description = "nightly import"
    with batch.jobs():
        from tests.jobsapp.jobs import RecordJob

        RecordJob.perform_async("in a batch")
    workflow = chain(Add.s(1), Add.s(2)).run("two steps")
    at = add_to_set(redis_db, "retry", failed("billing.jobs.RefundJob", jid="f" * 24), at=time.time() + 30)
    # Detail pages, beside every tab's page: (path under the dashboard, the sidebar entry they belong to).
    return [(f"workflows/{workflow.id}/", "Workflows"), (f"batches/{batch.bid}/", "Batches"),
            (f"batches/{workflow.steps()[1].bid}/", "Batches"), ("queues/default/", "Queues"),
            (f"retries/job/{payload.score(at)}-{'f' * 24}/", "Retries")]


@pytest.mark.parametrize("width", [1280, 390])
def test_every_page_fits_and_follows_the_admin(page, filled, width):  # noqa: F811
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(page.base + BASE)
    # Every tab this process has (the features' too), then the detail pages.
    tabs = page.evaluate("[...document.querySelectorAll('.wurk-tabs a.wurk-tab')]"
                         ".map(a => [a.getAttribute('href'), a.textContent.trim()])")
    assert len(tabs) >= 12, tabs
    paths = [(href[len(BASE):], label) for href, label in tabs] + filled
    problems = []
    for n, (path, label) in enumerate(paths):
        page.goto(page.base + BASE + path)
        crumbs = page.evaluate(BREADCRUMBS)
        # The breadcrumbs are the admin's bar under the header: coloured, holding their links,
        # not a bare numbered list.
        if crumbs["background"] in ("rgba(0, 0, 0, 0)", "transparent") or not crumbs["inside"] \
                or crumbs["numbered"] or crumbs["links"] < 2 or abs(crumbs["top"] - crumbs["header"]) > 2:
            problems.append(f"{path or 'dashboard'}: breadcrumbs {crumbs}")
        if width > 1024:
            current = page.locator("#nav-sidebar .current-model").all_inner_texts()
            if [text.strip().lower() for text in current] != [label.lower()]:
                problems.append(f"{path or 'dashboard'}: sidebar marks {current}, not {label}")
        fit = page.evaluate(OVERFLOW)
        if fit["scroll"] > width or fit["cut"] or fit["wrapped"]:
            problems.append(f"{path or 'dashboard'}: {fit}")
        name = path.split("/")[0] or "dashboard"
        if width < 1024:  # the phone's pages are the ones worth a look; shots cost CI time
            shot(page, f"layout-{VERSION}-{width}-{name}" + (f"-detail-{n}" if path.count("/") > 1 else ""))
    assert not problems, "\n".join(problems)
    if width > 1024:
        dark_mode_follows_the_admin(page)


def dark_mode_follows_the_admin(page) -> None:  # noqa: F811  (one login fewer than a test of its own)
    page.emulate_media(color_scheme="dark")
    page.goto(page.base + BASE + "batches/")
    colours = page.evaluate("[getComputedStyle(document.body).backgroundColor,"
                            " getComputedStyle(document.querySelector('.wurk-summary > div')).backgroundColor,"
                            " getComputedStyle(document.querySelector('.breadcrumbs')).backgroundColor]")
    assert colours[0] == colours[1] != "rgb(255, 255, 255)"  # the admin's dark body, our panels on it
    assert colours[2] not in ("rgba(0, 0, 0, 0)", "rgb(255, 255, 255)")
    shot(page, f"layout-{VERSION}-dark-batches")

