"""wurk_django.tasks.compat: Django's own django.tasks first, else the django-tasks backport
(Django 5.2), else nothing; and what WurkBackend relies on is the same in both (issue 27 item 5)."""

from __future__ import annotations

import importlib
import importlib.util
import json
import logging
import os
import subprocess
import sys

import pytest
from django.core import checks

from tests.support import ROOT
from wurk_django.checks import check_tasks_framework
from wurk_django.tasks import compat

needs_tasks = pytest.mark.skipif(not compat.AVAILABLE, reason="neither django.tasks nor the django-tasks backport")


def retried_later():
    """Module level, as both frameworks require of a task function."""
    return "ok"


def test_compat_picks_djangos_own_framework_before_the_backport():
    own = importlib.util.find_spec("django.tasks") is not None
    backport = importlib.util.find_spec("django_tasks") is not None
    # CI's py312 venv has both installed (the test extra): Django's own must win there.
    expected = "django.tasks" if own else "django_tasks" if backport else None
    assert compat.SOURCE == expected
    assert compat.AVAILABLE is (expected is not None)
    assert (expected or "no django.tasks") in compat.describe()


@needs_tasks
def test_every_name_comes_from_the_framework_in_use():
    """DJ-010: backend on Django 6.x and 5.2 + django-tasks."""
    framework = importlib.import_module(compat.SOURCE)
    base = importlib.import_module(f"{compat.SOURCE}.base")
    backends = importlib.import_module(f"{compat.SOURCE}.backends.base")
    signals = importlib.import_module(f"{compat.SOURCE}.signals")
    exceptions = importlib.import_module(f"{compat.SOURCE}.exceptions")
    for name in ("TaskContext", "TaskResult", "TaskResultStatus", "task", "task_backends",
                 "DEFAULT_TASK_BACKEND_ALIAS", "DEFAULT_TASK_QUEUE_NAME"):
        assert getattr(compat, name) is getattr(framework, name), name
    # Task and TaskError: the backport exports them from .base only.
    assert compat.Task is base.Task and compat.TaskError is base.TaskError
    assert compat.DEFAULT_TASK_PRIORITY == base.DEFAULT_TASK_PRIORITY == 0
    assert compat.BaseTaskBackend is backends.BaseTaskBackend
    for name in ("task_enqueued", "task_started", "task_finished"):
        assert getattr(compat, name) is getattr(signals, name), name
    # The backport's exception names carry an "Error" suffix: compat gives Django's names to both.
    suffix = "Error" if compat.SOURCE == "django_tasks" else ""
    assert compat.InvalidTask is getattr(exceptions, f"InvalidTask{suffix}")
    assert compat.InvalidTaskBackend is getattr(exceptions, f"InvalidTaskBackend{suffix}")
    assert compat.TaskResultDoesNotExist is exceptions.TaskResultDoesNotExist
    assert compat.TaskResultMismatch is exceptions.TaskResultMismatch
    assert compat.normalize_json({"a": (1, b"x")}) == {"a": [1, "x"]}


@needs_tasks
def test_status_names_and_priority_range_are_the_ones_results_map_to(backend):
    from tests.tasks import sample
    from wurk_django.tasks.results import STATUS_OF

    assert set(compat.TaskResultStatus.names) == {"READY", "RUNNING", "FAILED", "SUCCESSFUL"}
    assert set(STATUS_OF.values()) == set(compat.TaskResultStatus)
    assert sample.add.using(priority=100).priority == 100
    assert sample.add.using(priority=-100).priority == -100
    with pytest.raises(compat.InvalidTask, match="priority"):
        sample.add.using(priority=101)


@needs_tasks
def test_the_frameworks_own_task_decorator_builds_a_wurk_task_with_retry(backend):
    from wurk_django.tasks import WurkTask

    # Both frameworks hand unknown keywords to the backend's task_class (WurkTask).
    made = compat.task(retry=3)(retried_later)
    assert isinstance(made, WurkTask) and made.retry == 3 and made.call() == "ok"


@needs_tasks
def test_manage_py_check_runs_the_backends_checks(settings):
    # Django 6 registers its task checks on import; the backport from its AppConfig, which the
    # test settings install on Django 5.2 as docs/django.md tells users to.
    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend", "OPTIONS": {"RESLUT_TTL": 5}}}
    found = [m for m in checks.run_checks() if m.id and m.id.startswith("wurk.")]
    assert [m.id for m in found] == ["wurk.E030"], found
    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"}}
    assert [m for m in checks.run_checks() if m.id and m.id.startswith("wurk.")] == []


@needs_tasks
def test_a_failed_attempt_is_logged_with_its_traceback_by_the_frameworks_logger(backend, queued, caplog):
    from tests.tasks import sample
    from wurk_django import testing

    # task_finished goes out inside the except block: Django 6.1's receiver reads sys.exc_info(),
    # the backport's calls logger.exception() for FAILED; both then log the task's own traceback.
    sample.fail_once_only.enqueue("boom")
    with caplog.at_level(logging.INFO, logger=compat.SOURCE), pytest.raises(RuntimeError, match="boom"):
        testing.execute(queued())
    failed = [r for r in caplog.records if r.name == compat.SOURCE and r.levelno >= logging.ERROR]
    assert len(failed) == 1 and "FAILED" in failed[0].getMessage()
    assert failed[0].exc_info and failed[0].exc_info[0] is RuntimeError


def test_check_names_the_missing_framework(settings, monkeypatch):
    settings.TASKS = {"mail": {"BACKEND": "wurk_django.tasks.WurkBackend"}}
    monkeypatch.setattr(compat, "AVAILABLE", False)
    monkeypatch.setattr(compat, "SOURCE", None)
    [error] = check_tasks_framework()
    assert error.id == "wurk.E023" and error.obj == "TASKS['mail']"
    assert "wurk-django[tasks]" in error.hint and "django_tasks" in error.hint


def test_check_warns_when_the_backports_app_is_not_installed(settings, monkeypatch):
    from django.apps import apps

    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"}}
    monkeypatch.setattr(compat, "AVAILABLE", True)
    monkeypatch.setattr(compat, "SOURCE", "django_tasks")
    installed = apps.is_installed
    monkeypatch.setattr(apps, "is_installed", lambda name: name != "django_tasks" and installed(name))
    [warning] = check_tasks_framework()
    assert warning.id == "wurk.W023" and "INSTALLED_APPS" in warning.hint
    monkeypatch.setattr(apps, "is_installed", lambda name: True)
    assert check_tasks_framework() == []
    # Other backends are none of this check's business.
    settings.TASKS = {"default": {"BACKEND": "django.tasks.backends.immediate.ImmediateBackend"}}
    monkeypatch.setattr(compat, "AVAILABLE", False)
    assert check_tasks_framework() == []


def test_check_is_quiet_on_the_real_setup(settings):
    settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"}}
    expected = [] if compat.AVAILABLE else ["wurk.E023"]
    assert [m.id for m in check_tasks_framework()] == expected


NO_FRAMEWORK = """
import json, sys
sys.modules["django.tasks"] = None   # as on Django 5.2 without the backport: imports fail
sys.modules["django_tasks"] = None
import django
from django.conf import settings
django.setup()
settings.TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend"}}
import wurk_django.tasks as tasks
import wurk_django.admin
from wurk_django.admin_pages import pages
from wurk_django.checks import check_tasks_framework
print(json.dumps({"all": tasks.__all__, "source": tasks.compat.SOURCE,
                  "backport_app": "django_tasks" in settings.INSTALLED_APPS,
                  "pages": [p.key for p in pages()], "checks": [m.id for m in check_tasks_framework()]}))
"""


def test_without_any_framework_the_package_imports_and_the_check_says_what_to_install():
    # CI has a framework in both venvs now; this keeps the third branch of compat honest.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    out = subprocess.run([sys.executable, "-c", NO_FRAMEWORK], cwd=str(ROOT), env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["all"] == ["AVAILABLE"] and found["source"] is None
    assert found["backport_app"] is False  # the test settings add the app only where it imports
    assert "dashboard" in found["pages"] and "tasks" not in found["pages"]
    assert found["checks"] == ["wurk.E023"]
