"""The built sdist and wheel carry every file the package reads at run time (issue 40 item 1)."""

from __future__ import annotations

import re
import subprocess
import sys

from tests.packaging import distcheck
from tests.packaging.conftest import build, copy_tree

# setup.cfg's package_data before MANIFEST.in grafted the package: a list of patterns.
_PATTERN_LIST = """[options.package_data]
wurk_django =
    lua/*.lua
    lua/snippets/*.lua
    templates/**/*
    static/**/*
    locale/*/LC_MESSAGES/*

"""


def test_wheel_and_sdist_carry_every_package_file(built):
    tree, dist = built
    assert distcheck.problems(dist, tree) == []
    wheel = next(dist.glob("*.whl"))
    names = distcheck.wheel_files(wheel)
    # The files whose absence once broke an installed worker, named so a loose check can't pass.
    for path in ("wurk_django/batch/lua/push.lua", "wurk_django/limiter/lua/concurrent_acquire.lua",
                 "wurk_django/locale/fr/LC_MESSAGES/django.mo", "wurk_django/static/wurk_django/wurk.css",
                 "wurk_django/py.typed"):
        assert path in names or not (tree / path).exists(), path
    assert sum(name.endswith(".lua") for name in names) == len(list((tree / "wurk_django").rglob("*.lua")))


def test_the_check_fails_on_a_pattern_list_that_misses_feature_folders(tmp_path):
    """The old setup.cfg (patterns, no MANIFEST.in graft) left out 33 Lua scripts: the check says which."""
    tree = copy_tree(tmp_path / "checkout")
    (tree / "MANIFEST.in").unlink()
    cfg = tree / "setup.cfg"
    cfg.write_text(cfg.read_text().replace("[options.extras_require]", _PATTERN_LIST + "[options.extras_require]"))
    dist = build(tree, tmp_path / "dist")
    missing = distcheck.missing_from_wheel(next(dist.glob("*.whl")), tree)
    folders = {path.rsplit("/", 1)[0] for path in missing}
    # Every feature folder's lua/ and the folders under it (those of features added since too),
    # the six of the old report among them; the package's own lua/ is in the old patterns.
    package = tree / "wurk_django"
    feature_scripts = [p for p in package.rglob("*.lua")
                       if "lua" in p.relative_to(package).parts[1:-1] and p.relative_to(package).parts[0] != "lua"]
    assert folders == {p.parent.relative_to(tree).as_posix() for p in feature_scripts}
    assert folders >= {f"wurk_django/{area}/lua" for area in ("batch", "limiter", "unique", "leader", "periodic",
                                                              "workflow")}
    assert all(path.endswith(".lua") for path in missing)
    assert len(missing) == len(feature_scripts)
    assert distcheck.main([str(dist), "--tree", str(tree)]) == 1


def test_a_new_feature_folder_is_shipped_without_a_setup_change(tmp_path):
    tree = copy_tree(tmp_path / "checkout")
    script = tree / "wurk_django" / "newfeature" / "lua" / "step.lua"
    script.parent.mkdir(parents=True)
    script.write_text("return 1\n")
    dist = build(tree, tmp_path / "dist")
    assert "wurk_django/newfeature/lua/step.lua" in distcheck.wheel_files(next(dist.glob("*.whl")))
    assert distcheck.problems(dist, tree) == []


def test_twine_check_is_clean(built):
    _, dist = built
    done = subprocess.run([sys.executable, "-m", "twine", "check", "--strict", *map(str, sorted(dist.iterdir()))],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_wheel_names_its_version_licence_and_python(built):
    import wurk_django

    tree, dist = built
    meta = distcheck.wheel_metadata(next(dist.glob("*.whl")))
    assert meta["Version"] == wurk_django.__version__
    assert meta["Requires-Python"] == ">=3.11"
    assert meta.get("License-Expression") == "MIT"
    assert "LICENSE" in (meta.get_all("License-File") or [])
    assert any(re.fullmatch(r"wurk_django-[^/]+\.dist-info/licenses/LICENSE", n)
               for n in distcheck.wheel_files(next(dist.glob("*.whl"))))
