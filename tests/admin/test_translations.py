"""The admin in the user's language (CORE-201): the catalogs are complete and compiled,
no page text escapes the translation machinery, and every Wurk page renders in French
when the browser asks for it (LocaleMiddleware, as docs/admin.md tells users to set up)."""

from __future__ import annotations

import ast
import gettext
import re
import time
from datetime import UTC, datetime
from html import unescape
from pathlib import Path

import django
import pytest
from django.template.base import Lexer, TokenType

from wurk_django import catalogs, payload

from .conftest import BASE, add_to_set, enqueue, failed, heartbeat, job

LANGUAGES = catalogs.languages()
PLACEHOLDER = re.compile(r"%(?:\([a-z_]+\))?[sdr%]")
TAG = re.compile(r"</?([a-z]+)")


def test_french_is_there():
    assert "fr" in LANGUAGES


# -- the catalogs -------------------------------------------------------------------


def _expected_catalog(language: str) -> dict:
    """What Python's gettext must read from the .mo, built from the .po."""
    expected: dict = {}
    for entry in catalogs.read_po(catalogs.po_path(language)):
        if entry.msgid and not entry.translated:
            continue
        key = entry.msgid if entry.context is None else f"{entry.context}\x04{entry.msgid}"
        if entry.plural is None:
            expected[key] = entry.strings[0]
        else:
            for index, text in enumerate(entry.strings):
                expected[(key, index)] = text
    return expected


@pytest.mark.parametrize("language", LANGUAGES)
def test_the_compiled_mo_is_up_to_date_with_the_po(language):
    """CORE-201: the committed .mo holds exactly the .po's translations (recompile:
    ``python -m wurk_django.catalogs --compile``)."""
    mo = catalogs.po_path(language).with_suffix(".mo")
    with mo.open("rb") as handle:
        compiled = gettext.GNUTranslations(handle)._catalog
    expected = _expected_catalog(language)
    stale = {k: v for k, v in expected.items() if compiled.get(k) != v}
    extra = set(compiled) - set(expected)
    assert not stale and not extra, (f"{mo} is stale: run python -m wurk_django.catalogs --compile "
                                     f"({len(stale)} differ, {len(extra)} not in the .po)")


def test_the_pure_python_compiler_reads_back_as_gettext_does(tmp_path):
    mo = tmp_path / "django.mo"
    mo.write_bytes(catalogs.mo_bytes(catalogs.read_po(catalogs.po_path("fr"))))
    with mo.open("rb") as handle:
        translations = gettext.GNUTranslations(handle)
    assert translations.gettext("Queues") == "Files"
    assert translations.pgettext("task status", "FAILED") == "ÉCHOUÉE"
    assert translations.ngettext("%(count)d day", "%(count)d days", 1) == "%(count)d jour"
    assert translations.ngettext("%(count)d day", "%(count)d days", 3) == "%(count)d jours"


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_message_of_the_sources_is_translated(language):
    """A new ``{% translate %}`` or ``gettext()`` string fails here until the catalog has it,
    translated (``python -m wurk_django.catalogs``, then fill in the msgstr)."""
    wanted = catalogs.source_messages()
    entries = {e.key: e for e in catalogs.read_po(catalogs.po_path(language)) if e.msgid}
    missing = sorted(f"{where}: {key[1]!r}" for key, where in wanted.items() if key not in entries)
    untranslated = sorted(repr(e.msgid) for key, e in entries.items() if key in wanted and not e.translated)
    stale = sorted(repr(key[1]) for key in entries if key not in wanted)
    assert not missing, f"not in the {language} catalog (run python -m wurk_django.catalogs): {missing}"
    assert not untranslated, f"untranslated in the {language} catalog: {untranslated}"
    assert not stale, f"in the {language} catalog but gone from the sources: {stale}"


@pytest.mark.parametrize("language", LANGUAGES)
def test_translations_keep_every_placeholder_and_tag(language):
    for entry in catalogs.read_po(catalogs.po_path(language)):
        if not entry.msgid or not entry.translated:
            continue
        sources = [entry.msgid] if entry.plural is None else [entry.msgid, entry.plural]
        names = sorted(set(PLACEHOLDER.findall(sources[-1])) | set(PLACEHOLDER.findall(sources[0])))
        tags = sorted(TAG.findall(sources[-1]))
        for text in entry.strings:
            # A singular form may leave the count out ("the job" for 1), never another value.
            assert set(PLACEHOLDER.findall(text)) <= set(names), (entry.msgid, text)
            assert sorted(TAG.findall(text)) == tags, (entry.msgid, text)
        assert set(PLACEHOLDER.findall(entry.strings[-1])) == set(names), (entry.msgid, entry.strings[-1])


# -- nothing left out of the machinery ------------------------------------------------

#: Text a template may show as it is: units, symbols and names that read the same in any language.
AS_IS = {"s", "UTC", "ms", "PID", "JID", "RSS", "Redis", "Wurk"}
HUMAN_ATTRIBUTES = re.compile(r'\s(?:title|placeholder|aria-label|alt|data-confirm)="([^"]*)"')
WORD = re.compile(r"[^\W\d_]{2,}")


def _template_leftovers(path: Path) -> list[str]:
    """Words of a template's own text outside the translation tags."""
    source = path.read_text(encoding="utf-8")
    pieces = []
    # Open blocks, each marked whether its text is page text: a blocktranslate's is the
    # message itself, a comment's is not shown, bodyclass holds CSS class names.
    stack: list[bool] = []
    for token in Lexer(source).tokenize():
        if token.token_type == TokenType.BLOCK:
            name = token.contents.split()[0]
            if name in ("blocktranslate", "blocktrans", "comment"):
                stack.append(True)
            elif name == "block":
                stack.append(token.contents == "block bodyclass")
            elif name in ("endblocktranslate", "endblocktrans", "endcomment", "endblock") and stack:
                stack.pop()
            pieces.append("\x00")
        elif token.token_type == TokenType.TEXT and not any(stack):
            pieces.append(token.contents)
        else:
            pieces.append("\x00")
    text = "".join(pieces)
    text = re.sub(r"<script\b.*?</script>", " ", text, flags=re.S)
    words = [w for value in HUMAN_ATTRIBUTES.findall(text) for w in WORD.findall(value)]
    words += WORD.findall(re.sub(r"<[^>]*>", " ", text))
    return [w for w in words if w not in AS_IS]


@pytest.mark.parametrize("template", sorted(p.name for p in (catalogs.TEMPLATES / "wurk_django" / "admin").glob("*.html")))
def test_no_template_text_bypasses_translation(template):
    """Every word a page shows from its template is inside {% translate %} or
    {% blocktranslate %}: a new button or heading in plain English fails here."""
    assert _template_leftovers(catalogs.TEMPLATES / "wurk_django" / "admin" / template) == []


def test_the_leftover_check_catches_plain_english(tmp_path):
    sample = tmp_path / "sample.html"
    sample.write_text('{% load i18n %}<h2>Workflows</h2><button data-confirm="Stop it?">{% translate "Go" %}'
                      '</button><p>{% blocktranslate %}Fine {{ x }}{% endblocktranslate %} 5 s</p>')
    assert _template_leftovers(sample) == ["Stop", "it", "Workflows"]


VISIBLE_CALLS = {"success", "error", "warning", "info", "debug"}


def _python_leftovers(path: Path) -> list[str]:
    """Literal English handed to the user: a flashed message, a page title, a tab label."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        literal = (ast.Constant, ast.JoinedStr)
        if (isinstance(func, ast.Attribute) and func.attr in VISIBLE_CALLS and isinstance(func.value, ast.Name)
                and func.value.id == "messages" and len(node.args) > 1 and isinstance(node.args[1], literal)):
            found.append(f"{path.name}:{node.lineno} message")
        for keyword in node.keywords:
            if keyword.arg in ("title", "label") and isinstance(keyword.value, literal):
                found.append(f"{path.name}:{node.lineno} {keyword.arg}=")
        if isinstance(func, ast.Name) and func.id == "Page" and len(node.args) > 1 and isinstance(node.args[1], literal):
            found.append(f"{path.name}:{node.lineno} tab label")
    return found


def test_no_view_text_bypasses_translation():
    leftovers = []
    for path in sorted(catalogs.PACKAGE.rglob("*.py")):
        leftovers += _python_leftovers(path)
    assert leftovers == []


def test_the_python_check_catches_plain_english(tmp_path):
    sample = tmp_path / "view.py"
    sample.write_text('messages.success(request, f"Stopped {n}.")\nrender(r, m, "x.html", {}, title="Graph")\n'
                      'register(Page("graph", "Graph", "wurk_graph", urls, 90))\n'
                      'messages.info(request, _("Fine."))\n')
    assert _python_leftovers(sample) == ["view.py:1 message", "view.py:2 title=", "view.py:3 tab label"]


# -- every page, in French -------------------------------------------------------------


@pytest.fixture
def french(admin_client):
    admin_client.defaults["HTTP_ACCEPT_LANGUAGE"] = "fr"
    return admin_client


@pytest.fixture
def everything(redis_db):
    """Something on every page: a queue, the three sets, a process at work, a batch, a
    periodic loop, a limiter, a profile, metrics, a bulk action, a task result."""
    from tests.metrics.test_query import sidekiq_flush
    from wurk_django import limiter, periodic
    from wurk_django.api import bulk
    from wurk_django.batch import Batch
    from wurk_django.periodic import registration
    from wurk_django.profiling.store import store

    running = job("ReportJob", queue="default")
    enqueue(redis_db, job("ReportJob", args=[1, "deux"]))
    heartbeat(redis_db, busy=1, work={"t1": running})
    retry = failed("ReportJob")
    retry_at = add_to_set(redis_db, "retry", retry)
    add_to_set(redis_db, "schedule", job("ReportJob"))
    add_to_set(redis_db, "dead", failed("ReportJob"), at=time.time() - 60)
    batch = Batch()
    batch.description = "nightly import"
    with batch.jobs():
        from tests.jobsapp.batch_jobs import Mark

        Mark.perform_async(1)
    registration.forget_code_registrations()
    loop = periodic.register("0 4 * * *", "tests.jobsapp.jobs.RecordJob", args=["x"])
    limiter.concurrent("erp", 3).within_limit(lambda: None)
    store(redis_db, token="mike", jid="1234abcd", job_type="HardJob", started_at=time.time(), elapsed=0.5,
          data=b"not a profile")
    sidekiq_flush(redis_db, datetime.now(UTC), {"ReportJob": {"p": 12, "f": 2, "ms": 5400}}, durations={"ReportJob": [90, 300]})
    token = bulk.start("dead", "retry", redis=redis_db)
    yield {"retry_key": f"{payload.score(retry_at)}-{retry['jid']}", "bid": batch.bid, "lid": loop.lid,
           "token": token}
    registration.forget_code_registrations()


#: page -> French words it must show (besides the tabs and the summary bar on every page)
def _pages(data: dict) -> dict[str, list[str]]:
    pages = {
        "": ["Traités aujourd'hui", "Latence de la file default", "Historique", "En service depuis"],
        "busy/": ["Jobs en cours", "Dernier battement", "en marche", "Tout mettre au repos", "il y a"],
        "queues/": ["Latence", "Mettre en pause", "Tout supprimer définitivement"],
        "queues/default/": ["Plus récents d'abord", "3 jobs, latence", "Supprimer définitivement"],
        "scheduled/": ["Exécution à", "Mettre en file", "Tout mettre en file"],
        "retries/": ["Prochain essai", "Réessayer maintenant", "Sélection\u00a0:"],
        "dead/": ["Mort à", "Tout réessayer"],
        f"retries/job/{data['retry_key']}/": ["Prochain essai", "Retour à Réessais", "Envoyer aux morts"],
        "retries/job/1.0-nosuchjob/": ["Ce job n'est plus dans Réessais"],
        "dead/all/retry/": ["Tout réessayer\u00a0?", "Cela s'applique à chaque job de Morts", "Annuler"],
        f"bulk/{data['token']}/": ["Tout réessayer", "0 sur 1 job fait", "Retour"],
        "metrics/": ["Temps d'exécution", "Classe de job", "Temps moyen"],
        "metrics/ReportJob/": ["Durées", "Secondes par minute", "Toutes les classes"],
        "batches/": ["Progression", "Restants", "en cours"],
        f"batches/{data['bid']}/": ["Rappels", "Jobs encore restants", "Invalider"],
        "limits/": ["Limiteurs de débit", "Compteurs", "Réinitialiser"],
        "periodic/": ["Jobs périodiques", "Prochaine exécution", "Mettre en file maintenant", "chaque jour à 04:00"],
        f"periodic/{data['lid']}/": ["Fuseau horaire", "Il ne s'est pas encore déclenché."],
        "history/": ["Débit", "Taille des files", "Latence des files"],
        "profiles/": ["Profils de jobs", "Télécharger"],
        "profiles/mike-1234abcd/": ["Ce profil ne peut pas être lu ici", "Retour aux profils"],
    }
    if django.VERSION >= (6, 0):
        pages["tasks/"] = ["Résultats des tâches", "Tout statut"]
        pages[f"tasks/{payload.new_jid()}/"] = ["Aucun résultat", "il n'a jamais existé ou a expiré"]
    return pages


#: English that must not be left on any French page (tab and summary labels).
ENGLISH = ("Dashboard", "Queues", "Scheduled", "Retries", ">Dead<", "Processed", "Enqueued", "Failed", "Busy")


@pytest.mark.django_db
def test_every_wurk_page_in_french(french, everything):
    """CORE-201: with the browser asking for French, every Wurk page renders with French
    text; the wire data (queue, class, arguments) stays as it is."""
    for page, words in _pages(everything).items():
        response = french.get(BASE + page)
        assert response.status_code in (200, 404), (page, response.status_code)
        html = unescape(response.content.decode())
        assert '<html lang="fr"' in html, page
        for word in [*words, "Tableau de bord", "Files", "Planifiés", "Traités", "Accueil"]:
            assert word in html, (page, word)
        tabs_and_bar = html[html.index('class="wurk-tabs"'):html.index("</dl>")]
        for word in ENGLISH:
            assert word not in tabs_and_bar, (page, word)
    queue = french.get(BASE + "queues/default/").content.decode()
    assert "ReportJob" in queue and "1, &quot;deux&quot;" in queue  # the arguments as they are


@pytest.mark.django_db
def test_messages_after_actions_are_in_french(french, everything, redis_db):
    response = french.post(BASE + "queues/default/action/", {"action": "pause"}, follow=True)
    assert "File default en pause" in unescape(response.content.decode())
    response = french.post(BASE + "busy/", {"action": "quiet", "identity": "nope:1:x"}, follow=True)
    assert "Aucun processus actif nope:1:x." in response.content.decode()
    response = french.post(BASE + f"retries/job/{everything['retry_key']}/", {"action": "kill"}, follow=True)
    assert "Envoyer aux morts\u00a0: 1 job." in response.content.decode()


@pytest.mark.django_db
def test_english_stays_the_default(admin_client, everything):
    html = admin_client.get(BASE + "busy/").content.decode()
    assert '<html lang="en' in html and "Running jobs" in html and "Jobs en cours" not in html


@pytest.mark.django_db
def test_the_language_chosen_with_set_language_sticks(admin_client, redis_db):
    """Django's set_language view (a cookie) switches the Wurk pages too, whatever the browser asks."""
    admin_client.defaults["HTTP_ACCEPT_LANGUAGE"] = "en"
    assert "Running jobs" in admin_client.get(BASE + "busy/").content.decode()
    admin_client.post("/i18n/setlang/", {"language": "fr", "next": BASE})
    assert "Jobs en cours" in admin_client.get(BASE + "busy/").content.decode()
