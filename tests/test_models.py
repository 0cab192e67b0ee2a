"""The admin index entries are real, importable models: Django's shell (5.2+) imports
every model by its dotted path at start and names each one it cannot find (issue 45
item 5)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.apps import apps
from django.utils.module_loading import import_string

from tests.support import ROOT


def test_every_model_of_the_app_imports_by_its_dotted_path():
    models = apps.get_app_config("wurk_django").get_models()
    for model in models:
        assert import_string(f"{model.__module__}.{model.__qualname__}") is model


@pytest.mark.parametrize("verbosity", ["1", "2"])
def test_manage_shell_starts_without_noise(verbosity):
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "django", "shell", "-v", verbosity, "-c", "print('ok')"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    output = done.stdout + done.stderr
    assert "could not be automatically imported" not in output
    assert done.stdout.rstrip().endswith("ok")
    if verbosity == "2" and "imported automatically" in output:  # Django 5.2+ auto-imports models
        assert "from wurk_django.models import" in output and "BusyPage" in output
