"""Issue 12, item 3: a payload never imports a module outside what the registry allows."""

from __future__ import annotations

import json
import sys

import pytest

from tests.hostile.conftest import dead_entries
from wurk_django import registry
from wurk_django.errors import UnknownJobClass


def _skip_without_tasks() -> None:
    from wurk_django.tasks.compat import AVAILABLE

    if not AVAILABLE:
        pytest.skip("neither django.tasks (Django 6+) nor the django-tasks backport")


def _results():
    _skip_without_tasks()
    from wurk_django.tasks import results

    return results


@pytest.fixture
def marker_module(tmp_path, monkeypatch):
    """A module outside the installed apps that writes a marker file when imported."""
    marker = tmp_path / "imported"
    (tmp_path / "hostile_marker_mod.py").write_text(
        f"open({str(marker)!r}, 'w').write('ran')\n\ndef task():\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "hostile_marker_mod", marker
    sys.modules.pop("hostile_marker_mod", None)


def _task_payload(wrapped: str) -> bytes:
    return json.dumps({"class": "wurk_django.tasks.TaskJob", "wrapped": wrapped, "args": [[], {}],
                       "jid": "c" * 24, "queue": "default", "retry": True, "task": {}}).encode()


def test_task_payload_naming_an_outside_module_imports_nothing(redis_db, burst, marker_module):
    _skip_without_tasks()
    name, marker = marker_module
    redis_db.lpush("queue:default", _task_payload(f"{name}.task"), _task_payload("this.x"))
    emptied, _log = burst()
    assert emptied
    assert not marker.exists()
    assert "this" not in sys.modules or sys.modules["this"].__spec__ is None  # the Zen was never printed
    dead = dead_entries(redis_db)
    assert len(dead) == 2
    assert all("outside the modules a payload may import" in d["error_message"] for d in dead)


def test_resolve_refuses_outside_modules(marker_module):
    name, marker = marker_module
    with pytest.raises(UnknownJobClass):
        registry.resolve(f"{name}.SomeJob")
    assert not marker.exists()


def test_load_task_refuses_outside_modules(marker_module):
    results = _results()
    name, marker = marker_module
    with pytest.raises(results.RefusedTask):
        results.load_task(f"{name}.task")
    assert not marker.exists()


def test_allowed_prefix_may_be_imported(marker_module, settings):
    results = _results()
    name, marker = marker_module
    settings.WURK = {**settings.WURK, "IMPORT_ON_MISS": [name]}
    from wurk_django.conf import reset_config

    reset_config()
    with pytest.raises(results.RefusedTask, match="not a django.tasks Task"):
        results.load_task(f"{name}.task")
    assert marker.exists()  # allowed on purpose: imported, then refused as not a Task
