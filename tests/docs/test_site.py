"""The documentation site (mkdocs.yml) builds with ``--strict``, and strict catches what it should.

mkdocs.yml turns a page left out of the nav, a link to a missing page and a link to a
missing anchor into warnings, and ``--strict`` turns warnings into a failed build; the
API reference (mkdocstrings) fails the build on an object it cannot collect. The tests
below build the real tree once, then a copy with one fault each, which must fail.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .blocks import ROOT

pytest.importorskip("mkdocs")

# What the site is built from: mkdocs.yml names docs/ and docsite/ (its hooks and griffe
# extension), the home page is README.md and the changelog CHANGELOG.md; the package is read
# by mkdocstrings.
_SOURCES = ("mkdocs.yml", "README.md", "CHANGELOG.md", "docs", "docsite")


def _build(root: Path, site: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's banner about its successor
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=root, env=env, capture_output=True, text=True, timeout=180)


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    for name in _SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, root / name)
        else:
            shutil.copy(source, root / name)
    # The package the suite runs on: the checkout's, or the installed wheel's (the site is
    # built from its docstrings, and mkdocs.yml watches it).
    from tests.support import PACKAGE

    (root / "wurk_django").symlink_to(PACKAGE, target_is_directory=True)
    return root


def test_site_builds_strict(tmp_path):
    site = tmp_path / "site"
    result = _build(_copy(tmp_path), site)
    assert result.returncode == 0, result.stderr
    home = (site / "index.html").read_text()
    assert "Sidekiq" in home and 'href="jobs/"' in home  # README, its docs/ links rewritten
    reference = (site / "reference" / "wurk_django" / "index.html").read_text()
    assert 'id="wurk_django.Job.perform_async"' in reference
    assert ":class:" not in reference and ":func:" not in reference  # docsite/roles.py ran


def test_every_page_is_in_the_nav(tmp_path):
    from mkdocs.config import load_config

    config = load_config(str(_copy(tmp_path) / "mkdocs.yml"))

    def pages(entries):
        for entry in entries:
            if isinstance(entry, str):
                yield entry
            elif isinstance(entry, dict):
                for value in entry.values():
                    yield from pages(value) if isinstance(value, list) else [value]

    in_nav = set(pages(config["nav"]))
    docs = ROOT / "docs"
    on_disk = {str(path.relative_to(docs)) for path in docs.rglob("*.md")}
    assert on_disk - in_nav == set(), "pages missing from the nav of mkdocs.yml"
    assert in_nav - on_disk == {"index.md", "changelog.md"}  # generated from README.md and CHANGELOG.md
    assert config["validation"]["nav"]["omitted_files"] == logging.WARNING  # so --strict fails on one


# Each fault changes the copy and returns what the build's log must name.
def _broken_link(root: Path) -> str:
    with (root / "docs" / "admin.md").open("a") as page:
        page.write("\nSee [the missing page](no-such-page.md).\n")
    return "no-such-page.md"


def _broken_anchor(root: Path) -> str:
    with (root / "docs" / "admin.md").open("a") as page:
        page.write("\nSee [a missing section](jobs.md#no-such-section).\n")
    return "#no-such-section"


def _page_not_in_nav(root: Path) -> str:
    (root / "docs" / "orphan.md").write_text("# A page nobody listed\n")
    return "orphan.md"


def _readme_link_out_of_docs(root: Path) -> str:
    with (root / "README.md").open("a") as readme:
        readme.write("\nSee [the example](example_project/settings.py).\n")
    return "example_project/settings.py"


def _missing_object(root: Path) -> str:
    with (root / "docs" / "reference" / "unique.md").open("a") as page:
        page.write("\n::: wurk_django.no_such_module\n")
    return "wurk_django.no_such_module"


# The four faults mkdocs reports as warnings go into one copy, built once: a strict build logs
# every warning before it aborts, so each fault is named in the log, and any one of them alone
# would fail the build (strict turns each warning into a failure). A missing API object is an
# error that stops the build at once, so it gets a copy of its own.
_WARNINGS = [_broken_link, _broken_anchor, _page_not_in_nav, _readme_link_out_of_docs]


@pytest.mark.parametrize("faults", [_WARNINGS, [_missing_object]],
                         ids=["links_anchors_nav", "missing_object"])
def test_strict_build_fails_on(tmp_path, faults):
    root = _copy(tmp_path)
    named = [fault(root) for fault in faults]
    result = _build(root, tmp_path / "site")
    assert result.returncode != 0, result.stderr
    missing = [name for name in named if name not in result.stderr]
    assert missing == [], result.stderr  # failed for each fault, not for something else in the copy
