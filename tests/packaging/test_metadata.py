"""Release metadata says what is true of the package and of what CI tests (issue 40 item 2)."""

from __future__ import annotations

import configparser
import importlib
import inspect
import re
from pathlib import Path

import pytest

import wurk_django
from tests.support import ROOT


def _metadata() -> configparser.SectionProxy:
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(ROOT / "setup.cfg")
    return parser["metadata"]


def _classifiers() -> list[str]:
    return [line.strip() for line in _metadata()["classifiers"].splitlines() if line.strip()]


def _ci_matrix() -> tuple[set[str], set[str]]:
    """(Python versions, Django versions) that .ci/run installs and tests."""
    ci = (ROOT / ".ci" / "run").read_text()
    pythons = set(re.findall(r"^\w+=\$\(pick_python (3\.\d+) ", ci, re.M))
    djangos = set()
    for name in re.findall(r"constraints/(django\d+)\.txt", ci):
        spec = (ROOT / "constraints" / f"{name}.txt").read_text()
        djangos |= set(re.findall(r"^Django>=(\d+\.\d+),", spec, re.M))
    return pythons, djangos


def test_every_classifier_is_on_the_trove_list():
    from trove_classifiers import classifiers

    assert [c for c in _classifiers() if c not in classifiers] == []


def test_python_and_django_classifiers_are_what_ci_tests():
    pythons, djangos = _ci_matrix()
    assert pythons >= {"3.11", "3.12", "3.13"}, pythons  # two suites and the installed-wheel smoke
    assert djangos == {"5.2", "6.1"}, djangos
    listed = _classifiers()
    assert {c.rsplit(" ", 1)[1] for c in listed if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)} \
        == pythons
    assert {c.rsplit(" ", 1)[1] for c in listed if c.startswith("Framework :: Django :: ")} == djangos
    floor = min(pythons, key=lambda v: tuple(map(int, v.split("."))))
    options = configparser.ConfigParser(interpolation=None)
    options.read(ROOT / "setup.cfg")
    assert options["options"]["python_requires"] == f">={floor}"
    assert re.search(rf"^\s*Django>={min(djangos)}\s*$", options["options"]["install_requires"], re.M)


def test_the_version_lives_in_one_place_and_the_changelog_names_it():
    assert _metadata()["version"] == "attr: wurk_django.__version__"
    assert re.fullmatch(r"\d+\.\d+\.\d+((a|b|rc)\d+)?", wurk_django.__version__)
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert "keepachangelog.com" in changelog
    headings = re.findall(r"^## \[([^\]]+)\](?: - (\d{4}-\d\d-\d\d))?", changelog, re.M)
    assert headings[0] == ("Unreleased", "")
    version, date = headings[1]
    assert version == wurk_django.__version__ and date, headings[:2]
    # No other file states the version: a second copy is how they drift apart.
    for path in (ROOT / "setup.cfg", ROOT / "pyproject.toml", ROOT / "tox.ini"):
        assert wurk_django.__version__ not in path.read_text(), path


def test_the_licence_file_is_the_licence_setup_cfg_names():
    assert _metadata()["license_expression"] == "MIT"
    assert _metadata()["license_files"].strip() == "LICENSE"
    text = (ROOT / "LICENSE").read_text()
    assert text.startswith("MIT License") and "WITHOUT WARRANTY OF ANY KIND" in text


PUBLIC_MODULES = ["wurk_django", "wurk_django.batch", "wurk_django.limiter", "wurk_django.unique",
                  "wurk_django.workflow", "wurk_django.periodic", "wurk_django.leader", "wurk_django.api",
                  "wurk_django.testing", "wurk_django.celery"]


def _unannotated(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    names = getattr(module, "__all__", [n for n in dir(module) if not n.startswith("_")])
    found = []
    for name in names:
        obj = getattr(module, name, None)
        if inspect.isclass(obj) and obj.__module__.startswith("wurk_django"):
            functions = [(f"{name}.{k}", v) for k, v in vars(obj).items() if not k.startswith("_")]
        elif inspect.isfunction(obj) and obj.__module__.startswith("wurk_django"):
            functions = [(name, obj)]
        else:
            continue
        for qualname, function in functions:
            function = getattr(function, "__func__", function)
            if not inspect.isfunction(function):
                continue
            signature = inspect.signature(function)
            if signature.return_annotation is inspect.Signature.empty or any(
                    p.annotation is inspect.Parameter.empty and p.name not in ("self", "cls")
                    for p in signature.parameters.values()):
                found.append(f"{module_name}.{qualname}")
    return found


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_the_public_api_is_typed_as_py_typed_promises(module_name):
    assert (Path(wurk_django.__file__).parent / "py.typed").is_file()
    assert _unannotated(module_name) == []
