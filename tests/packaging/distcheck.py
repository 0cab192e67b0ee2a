"""Check built distributions against the tree they were built from.

Run by CI on what ``python -m build`` made, and by ``test_dist.py`` on wheels it builds
itself::

    python -m tests.packaging.distcheck dist/ [--tree .]

A wheel must carry every file of the ``wurk_django`` package (Lua scripts, templates,
static files, translations, ``py.typed`` as well as the modules): an installed package
reads them at run time, and a file left out fails only on the machine of whoever installed
it. The sdist must carry the same, plus what a packager needs to test it (the tests, the
docs, the licence and the changelog). Exit status 1 names every file missing.
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import zipfile
from email.parser import HeaderParser
from pathlib import Path

PACKAGE = "wurk_django"
# Files a build or a test run leaves in the tree: never shipped, never required.
_JUNK_DIRS = {"__pycache__"}
_JUNK_SUFFIXES = (".pyc", ".pyo")
SDIST_EXTRAS = ("README.md", "CHANGELOG.md", "LICENSE", "manage.py", "tests/conftest.py", "mkdocs.yml",
                "docsite/hooks.py")


def package_files(tree: Path) -> set[str]:
    """Every file under ``tree/wurk_django``, as paths relative to ``tree``."""
    found = set()
    for path in (tree / PACKAGE).rglob("*"):
        if not path.is_file() or _JUNK_DIRS & set(path.parts) or path.name.endswith(_JUNK_SUFFIXES):
            continue
        found.add(path.relative_to(tree).as_posix())
    return found


def wheel_files(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as archive:
        return {name for name in archive.namelist() if not name.endswith("/")}


def wheel_metadata(wheel: Path):
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return HeaderParser().parsestr(archive.read(name).decode())


def sdist_files(sdist: Path) -> set[str]:
    with tarfile.open(sdist) as archive:
        # Every member sits under "<name>-<version>/": strip that first part.
        return {m.name.split("/", 1)[1] for m in archive.getmembers() if m.isfile() and "/" in m.name}


def missing_from_wheel(wheel: Path, tree: Path) -> list[str]:
    return sorted(package_files(tree) - wheel_files(wheel))


def missing_from_sdist(sdist: Path, tree: Path) -> list[str]:
    wanted = package_files(tree) | {name for name in SDIST_EXTRAS if (tree / name).exists()}
    return sorted(wanted - sdist_files(sdist))


def problems(dist_dir: Path, tree: Path) -> list[str]:
    """What is wrong with the wheel and sdist in ``dist_dir``, one line each (empty: all good)."""
    wheels, sdists = sorted(dist_dir.glob("*.whl")), sorted(dist_dir.glob("*.tar.gz"))
    found: list[str] = []
    if len(wheels) != 1 or len(sdists) > 1:
        return [f"expected one wheel and at most one sdist in {dist_dir}, found {[p.name for p in (*wheels, *sdists)]}"]
    found += [f"{wheels[0].name} lacks {name}" for name in missing_from_wheel(wheels[0], tree)]
    for sdist in sdists:
        found += [f"{sdist.name} lacks {name}" for name in missing_from_sdist(sdist, tree)]
    stray = sorted(n for n in wheel_files(wheels[0]) if not n.startswith((f"{PACKAGE}/", f"{PACKAGE}-")))
    found += [f"{wheels[0].name} carries {name}, outside the package" for name in stray]
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dist", type=Path, help="the folder python -m build wrote")
    parser.add_argument("--tree", type=Path, default=Path.cwd(), help="the checkout the dists were built from")
    args = parser.parse_args(argv)
    found = problems(args.dist, args.tree)
    for line in found:
        print(line, file=sys.stderr)
    wheel = next(args.dist.glob("*.whl"), None)
    if wheel is not None and not found:
        print(f"{wheel.name}: {len(wheel_files(wheel))} files, every file of {PACKAGE}/ in the tree among them")
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
