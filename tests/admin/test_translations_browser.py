"""The admin in French in a real headless Chromium whose language is French (CORE-201):
the browser's ``Accept-Language`` alone switches the Wurk pages, scripts included.
Screenshots: artifacts/screenshots/fr-*.png."""

from __future__ import annotations

import re
import time

import pytest

from tests.admin.test_browser import browser, shot, signed_in  # noqa: F401  (fixtures)
from wurk_django import payload

from .conftest import BASE, add_to_set, enqueue, failed, heartbeat, job

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

#: English key labels: none may be left on a French page (tabs, headings, columns, buttons).
ENGLISH = {
    "Dashboard", "Busy", "Queues", "Scheduled", "Retries", "Dead", "Metrics", "Batches", "Limits", "Periodic",
    "Historical", "Profiles", "Tasks", "Processed", "Failed", "Enqueued", "Processed today", "Failed today",
    "Processes", "Utilization", "Live", "History", "Uptime", "Memory", "Host", "Tag", "Started",
    "Last beat", "State", "Quiet all", "Stop all", "Quiet", "Stop", "Running jobs", "Process", "Queue",
    "Class", "Size", "Latency", "Pause", "Unpause", "Clear", "Delete", "Retry now", "Add to queue",
    "Kill", "Delete for good", "Move to Dead", "Revoke", "Delete all for good", "Next retry", "Error", "Filter", "Schedule", "Time zone", "Last run", "Next run",
    "Enqueue now", "Periodic jobs", "Live poll", "Home",
}
KEY_LABELS = ".wurk-tabs a, #wurk-summary dt, .wurk-card h3, .wurk-panel h2, thead th, #wurk-root button, #wurk-fields th"


@pytest.fixture
def french(browser, live_server):  # noqa: F811
    confirms: list[str] = []

    def on_dialog(dialog):
        confirms.append(dialog.message)
        dialog.dismiss()

    context, tab = signed_in(browser, live_server, "lea", on_dialog, locale="fr-FR")
    tab.confirms = confirms  # type: ignore[attr-defined]
    yield tab
    context.close()


def labels(tab) -> list[str]:
    # The text, not how CSS shows it (card headings are in capitals).
    return [t.strip() for t in tab.locator(KEY_LABELS).all_text_contents() if t.strip()]


def assert_no_english(tab) -> None:
    left = sorted(set(labels(tab)) & ENGLISH)
    assert not left, f"{tab.url}: English left: {left}"


def test_the_wurk_pages_in_a_french_browser(french, redis_db):
    from wurk_django import periodic
    from wurk_django.periodic import registration

    enqueue(redis_db, job("ReportJob", args=[7, "mensuel"]))
    heartbeat(redis_db, busy=1, work={"t1": job("ReportJob")})
    retry = failed("ReportJob", error_message="connection refused")
    at = add_to_set(redis_db, "retry", retry, at=time.time() + 600)
    registration.forget_code_registrations()
    periodic.register("0 4 * * *", "tests.jobsapp.jobs.RecordJob", args=["x"])
    try:
        _walk(french, retry, at)
    finally:
        registration.forget_code_registrations()


def _walk(tab, retry: dict, at: float) -> None:
    # Dashboard: tabs, summary, cards, and the words the live script writes.
    tab.goto(tab.base + BASE)
    assert tab.locator("html").get_attribute("lang") == "fr"
    tabs = tab.locator(".wurk-tabs a").all_inner_texts()
    assert tabs[:7] == ["Tableau de bord", "Occupés", "Files", "Planifiés", "Réessais", "Morts", "Métriques"]
    cards = tab.locator(".wurk-cards").first.text_content()
    assert "Traités aujourd'hui" in cards and "Latence de la file default" in cards
    tab.wait_for_function("document.getElementById('wurk-live-status').textContent.startsWith('mis à jour')")
    # The number the live script wrote with that poll is in the page's format too.
    assert re.fullmatch(r"\d+,\d", tab.locator("[data-stat=default_latency]").text_content())
    assert tab.locator("#wurk-live-chart svg polyline").count() == 2
    assert_no_english(tab)
    shot(tab, "fr-dashboard")

    # Busy: the process and its running job, states and times in French.
    tab.goto(tab.base + BASE + "busy/")
    processes = tab.locator("#wurk-processes").inner_text()
    assert "en marche" in processes and "il y a" in processes and "shop" in processes
    assert "ReportJob" in tab.locator("#wurk-jobs").inner_text()
    tab.click("button:has-text('Tout arrêter')")
    assert tab.confirms[-1] == "Arrêter tous les processus\u00a0?"
    assert_no_english(tab)
    shot(tab, "fr-busy")

    # Queues: a confirm text, then an action and its flashed message.
    tab.goto(tab.base + BASE + "queues/")
    tab.click("#wurk-queues button:has-text('Tout supprimer définitivement')")
    assert tab.confirms[-1] == "Supprimer le job de default (1)\u00a0?"
    assert tab.locator("#wurk-queues tr[data-queue=default] [data-size]").inner_text() == "1"  # dismissed
    tab.click("#wurk-queues button:has-text('Mettre en pause')")
    assert "File default en pause" in tab.locator(".messagelist").inner_text()
    assert "en pause" in tab.locator("#wurk-queues tr[data-queue=default]").inner_text()
    assert_no_english(tab)
    shot(tab, "fr-queues")

    # One job: its labels and buttons translated, its own data left as it is.
    tab.goto(tab.base + BASE + f"retries/job/{payload.score(at)}-{retry['jid']}/")
    header = tab.locator(".wurk-panel-head").first.inner_text()
    assert "Prochain essai" in header and "Retour à Réessais" in header
    assert "RuntimeError: connection refused" in tab.locator("#wurk-error").inner_text()
    buttons = tab.locator(".wurk-actions button").all_inner_texts()
    assert buttons == ["Réessayer maintenant", "Mettre en file", "Supprimer définitivement", "Envoyer aux morts",
                       "Révoquer"]
    assert_no_english(tab)
    shot(tab, "fr-job")

    # A feature's page: Periodic, with the schedule in words.
    tab.goto(tab.base + BASE + "periodic/")
    row = tab.locator("#wurk-periodic tbody tr[data-lid]").inner_text()
    assert "chaque jour à 04:00" in row and "tests.jobsapp.jobs.RecordJob" in row
    assert "Aucun processus n'est leader" in tab.locator("#wurk-leader").inner_text()
    assert_no_english(tab)
    shot(tab, "fr-periodic")
