"""Build the sdist and wheel once per session from a copy of this checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT

# What a checkout holds that a build must not see: venvs, caches, earlier builds.
_IGNORED = shutil.ignore_patterns(".git", ".venv", ".venv-*", ".tox", "build", "dist", "site", "*.egg-info",
                                  "__pycache__", "*.pyc", ".pytest_cache", ".ruff_cache", "*.sqlite3", "artifacts")


def copy_tree(dest: Path) -> Path:
    """The checkout copied to ``dest`` as a build sees it."""
    if not (ROOT / "wurk_django").is_dir():
        pytest.skip("no wurk_django/ beside the tests: this suite runs against the installed package, "
                    "whose wheel .ci/run checked with tests.packaging.distcheck before installing it")
    shutil.copytree(ROOT, dest, ignore=_IGNORED)
    return dest


def build(tree: Path, out: Path) -> Path:
    """``python -m build`` on ``tree`` (no isolation: the test venv has setuptools); returns ``out``."""
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(tree)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


@pytest.fixture(scope="session")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """(tree, dist folder): this checkout's sdist and wheel, built once."""
    tree = copy_tree(tmp_path_factory.mktemp("tree") / "checkout")
    return tree, build(tree, tmp_path_factory.mktemp("dist"))
