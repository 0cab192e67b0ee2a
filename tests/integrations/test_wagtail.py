"""A real Wagtail site on WurkBackend ends as on ImmediateBackend (issue 45 item 1).

Wagtail enqueues its search-index and reference-index tasks inside the transactions of its
admin's actions. The same editor's session (tests/integrations/wagtail_scenario.py: images
and pages created, edited, published, renamed, deleted, each in ``atomic()`` or through the
admin's views; the end read through Wagtail's API too) runs twice on
a fresh site: once on the django-tasks backport's ImmediateBackend (the reference), once on
WurkBackend with its defaults and a real worker process. Search results, search index and
reference index must be equal, with no failed task. Before tasks were pushed after commit,
tasks ran before their rows were committed: ``DoesNotExist``, retries, a missing index entry.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from tests.support import ROOT

if importlib.util.find_spec("wagtail") is None:
    pytest.skip("wagtail is not installed (pip install -e '.[wagtail]')", allow_module_level=True)

pytestmark = pytest.mark.slow

SETTINGS = "tests.integrations.wagtail_settings"
# The worker may import modelsearch's task (Wagtail's search runs on it; not an installed app).
WORKER_EXTRA = json.dumps({"IMPORT_ON_MISS": ["modelsearch"]})


def _site(tmp_path, backend: str) -> dict[str, str]:
    return {"DJANGO_SETTINGS_MODULE": SETTINGS, "WURK_TEST_WAGTAIL_BACKEND": backend,
            "WURK_TEST_WAGTAIL_SQLITE": str(tmp_path / f"{backend}.sqlite3"),
            "WURK_TEST_MEDIA": str(tmp_path / f"media-{backend}")}


def _session(tmp_path, site: dict[str, str]) -> dict:
    out = tmp_path / f"{site['WURK_TEST_WAGTAIL_BACKEND']}.json"
    done = subprocess.run([sys.executable, "-m", "tests.integrations.wagtail_scenario", str(out)], cwd=str(ROOT),
                          env={**os.environ, **site, "PYTHONUNBUFFERED": "1"}, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(out.read_text())


def test_wagtail_on_a_real_worker_ends_as_on_the_immediate_backend(redis_db, worker_factory, tmp_path):
    reference = _session(tmp_path, _site(tmp_path, "immediate"))
    site = _site(tmp_path, "wurk")
    # One thread: the site is SQLite, which lets one writer in at a time.
    worker = worker_factory("-c", "1", "-q", "default", settings=SETTINGS,
                            env={**site, "WURK_TEST_EXTRA": WORKER_EXTRA})
    ours = _session(tmp_path, site)
    assert ours["failures"] == [], worker.output()[-3000:]
    assert ours["failed_tasks"] == 0 and ours["dead"] == 0 and ours["retry"] == 0
    assert ours["tasks"] > 20  # Wagtail's tasks ran here, on the worker
    assert ours["searches"]["sunrise"]["images"] == ["Sunrise over harbour"]  # the rename the issue lost
    for part in ("searches", "api", "index", "references"):
        assert ours[part] == reference[part], part
