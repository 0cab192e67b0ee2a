"""A real open-source Django project's Celery task tests, on Celery and then on wurk (issue 44 item 6).

The project is django-celery-email 3.0.0 (BSD, its LICENSE kept beside it; vendored
unchanged from github.com/pmclanahan/django-celery-email at d47da19 under
``django_celery_email/``): a Django email backend whose one Celery task, ``send_emails``,
sends the messages; its 25 tests call the task directly, through ``delay`` (mocked), with
``retry`` (mocked), read the task's options, and send mail end to end in eager mode through
``celery.current_app.conf.task_always_eager``, as the project's own suite does.

Each run copies the project to a temporary folder and runs its own runner (``runtests.py``)
in a fresh process: once as published, on the Celery installed in the venv; once with the
``celery`` imports changed to ``wurk_django.celery`` (the only edit of its code) and
``wurk_django`` added to ``INSTALLED_APPS``, as docs/from-celery.md tells a project to do.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import django
import pytest

from tests.support import ROOT

# Its last release predates Django 6.0, which removed EmailMessage.mixed_subtype that its
# utils read: 24 of its 25 tests fail on Django 6 on Celery itself. The suite on Django 5.2
# (CI's py311 venv) runs it.
pytestmark = pytest.mark.skipif(django.VERSION >= (6, 0), reason="django-celery-email 3.0 does not run on "
                                "Django 6 (it reads EmailMessage.mixed_subtype, gone in 6.0), on Celery either")

PROJECT = Path(__file__).resolve().parent / "django_celery_email"

#: The import lines of the project that name Celery, and what each becomes.
IMPORT_CHANGES = [
    (re.compile(r"^(\s*)from celery( |\.)", re.M), r"\1from wurk_django.celery\2"),
    (re.compile(r"^(\s*)import celery$", re.M), r"\1from wurk_django import celery"),
]

#: Its tests (all 25 pass on Celery 5.5-5.7): the count both runs must report.
TESTS = 25


def _copy(tmp_path: Path, name: str) -> Path:
    target = tmp_path / name
    shutil.copytree(PROJECT, target)
    return target


def _run(folder: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "runtests.py"], cwd=folder, capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


def _summary(done: subprocess.CompletedProcess) -> tuple[int, bool]:
    """(tests run, all passed) from the Django runner's output."""
    found = re.search(r"^Ran (\d+) tests?", done.stderr, re.M)
    return (int(found.group(1)) if found else 0), bool(re.search(r"^OK$", done.stderr, re.M))


def _move_to_wurk(folder: Path) -> int:
    """Change the project's ``celery`` imports; the number of lines changed."""
    changed = 0
    for path in sorted(folder.rglob("*.py")):
        text = path.read_text()
        new = text
        for pattern, replacement in IMPORT_CHANGES:
            new = pattern.sub(replacement, new)
        changed += sum(a != b for a, b in zip(text.splitlines(), new.splitlines(), strict=True))
        path.write_text(new)
    settings = folder / "tests" / "settings.py"
    settings.write_text(settings.read_text() + "\n# The move to wurk (docs/from-celery.md): the app, and its Redis.\n"
                        "INSTALLED_APPS += ('wurk_django',)\n"
                        f"WURK = {{'REDIS_URL': {os.environ.get('WURK_TEST_REDIS_URL', 'redis://127.0.0.1:6379/15')!r}}}\n")
    return changed


def test_on_celery(tmp_path):
    """The reference: the project's tests as published pass on real Celery."""
    for module in ("celery", "appconf"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} is not installed (the test extra installs it)")
    done = _run(_copy(tmp_path, "on_celery"))
    assert _summary(done) == (TESTS, True), done.stderr[-3000:]


def test_on_wurk_with_imports_changed(tmp_path):
    """The same tests, the imports changed: all pass on wurk_django.celery, with no
    ``manage.py check`` warning about the project's own ``CELERY_EMAIL_*`` settings."""
    if importlib.util.find_spec("appconf") is None:
        pytest.skip("django-appconf is not installed (the test extra installs it)")
    folder = _copy(tmp_path, "on_wurk")
    assert _move_to_wurk(folder) == 3  # tasks.py's two imports, tests.py's one
    # The tree of this checkout, not an installed wurk_django, with the project's own
    # ``tests`` package first (the script's folder leads sys.path).
    done = _run(folder, PYTHONPATH=str(ROOT))
    assert _summary(done) == (TESTS, True), done.stderr[-3000:]
    assert "System check identified no issues" in done.stdout, done.stdout[-3000:]
