"""The suite runs against the package it is told to: .ci/run's py312 suite on the installed wheel
(WURK_TEST_INSTALLED=1), its py311 suite and a contributor's run on the checkout (issue 40 item 1)."""

from __future__ import annotations

import importlib.metadata
import json
import os

import pytest

from tests.support import PACKAGE, ROOT

INSTALLED = os.environ.get("WURK_TEST_INSTALLED") == "1"


@pytest.mark.skipif(not INSTALLED, reason="the editable suite: the installed-wheel suite of .ci/run checks this")
def test_the_installed_suite_imports_the_wheel_not_a_checkout():
    import wurk_django

    assert not (ROOT / "wurk_django").exists(), "the installed suite's tree must not hold wurk_django/"
    assert PACKAGE == __import__("pathlib").Path(wurk_django.__file__).resolve().parent
    assert "site-packages" in PACKAGE.parts, PACKAGE
    dist = importlib.metadata.distribution("wurk-django")
    direct = json.loads(dist.read_text("direct_url.json") or "{}")
    assert not direct.get("dir_info", {}).get("editable"), direct
    assert dist.version == wurk_django.__version__
    # Every file the wheel's RECORD lists is on disk: the installer wrote the whole package.
    listed = [f for f in dist.files if str(f).startswith("wurk_django/")]
    assert len(listed) > 300 and all(f.locate().exists() for f in listed)


@pytest.mark.skipif(INSTALLED, reason="the installed-wheel suite: the other test here checks it")
def test_the_editable_suite_imports_the_checkout():
    assert PACKAGE == (ROOT / "wurk_django").resolve()
