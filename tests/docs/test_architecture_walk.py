"""docs/architecture.md's walk of one job stays true (issue 41 item 7).

The walk names the modules a plain push and its run pass through. A page like that goes
stale the day a module is added on the way, so these tests trace a real push and a real
run (a worker's processor thread) in a fresh process (``walk_trace.py``) and fail when
the job enters a module of the package that the walk's part for it does not name. They
do not ask the walk to be short, only honest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = ROOT / "docs" / "architecture.md"


@pytest.fixture(scope="module")
def traced() -> dict[str, list[str]]:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings"}
    done = subprocess.run([sys.executable, "-m", "tests.docs.walk_trace"], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _section(start: str, end: str) -> str:
    text = PAGE.read_text()
    return text[text.index(start):text.index(end)]


def _unnamed(entered: list[str] | set[str], section: str) -> list[str]:
    return sorted(module for module in entered if f"`{module}`" not in section)


def test_every_module_a_push_enters_is_named_in_the_walk(traced):
    assert "client/push.py" in traced["push"] and "client/writer.py" in traced["push"]  # the trace saw it
    unnamed = _unnamed(traced["push"], _section("### The push", "### The run"))
    assert not unnamed, f"a push enters modules docs/architecture.md's walk does not name: {unnamed}"


def test_every_module_a_run_enters_is_named_in_the_walk(traced):
    assert "server/run/settle.py" in traced["run"] and "server/fetch/slot.py" in traced["run"]
    unnamed = _unnamed(traced["run"], _section("### The run", "## Where a feature plugs in"))
    assert not unnamed, f"a run enters modules docs/architecture.md's walk does not name: {unnamed}"


def test_a_module_the_walk_does_not_name_is_caught():
    section = "the door is `client/push.py`; the writer is `client/writer.py`"
    assert _unnamed({"client/push.py", "client/writer.py", "client/new_step.py"}, section) == ["client/new_step.py"]
