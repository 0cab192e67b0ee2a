"""Every source file the docs name exists (issue 41 item 7).

A page that tells the next developer "the fetch slot is in ``server/fetch_slot.py``" after
the file moved sends them nowhere. Each backquoted token in README.md and docs/ that ends
in ``.py`` or ``.lua`` must be the path of a file in the repository, whole or as its
trailing part (``server/run/processor.py`` and ``processor.py`` both name
``wurk_django/server/run/processor.py``). docs/benchmarks-history.md is exempt: it records
what was measured on the tree of its day, file names included.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
EXEMPT = {"benchmarks-history.md"}
NAMED = re.compile(r"`([A-Za-z0-9_./-]+\.(?:py|lua))`")


def _repository_files() -> list[str]:
    listed = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout:
        files = listed.stdout.splitlines()
    else:  # not a git checkout (an unpacked sdist, CI's copy of the tree): walk it instead
        files = [str(path.relative_to(ROOT)) for path in ROOT.rglob("*") if path.is_file()]
    if not any(path.startswith("wurk_django/") for path in files):
        # The installed-wheel suite runs from a copy of the tree without the package: its
        # files are those of the package as installed.
        import wurk_django

        package = Path(wurk_django.__file__).resolve().parent
        files += [f"wurk_django/{path.relative_to(package)}" for path in package.rglob("*") if path.is_file()]
    return files


def _pages() -> list[Path]:
    return [ROOT / "README.md", *sorted(page for page in (ROOT / "docs").glob("*.md") if page.name not in EXEMPT)]


def _folders(files: list[str]) -> set[str]:
    """Every folder of the repository, and every folder of the package by its own name."""
    found = set()
    for path in files:
        parts = path.split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            found.add("/".join(parts[:depth]))
        if parts and parts[0] == "wurk_django":
            for depth in range(2, len(parts) + 1):
                found.add("/".join(parts[1:depth]))
    return found


def _missing(text: str, files: list[str]) -> list[tuple[int, str]]:
    """(line, name) of each file ``text`` names that is not among ``files``. A path whose
    first folder is none of ours (``myapp/limits.py``, ``proj/celery.py``) is a file of
    the user's project in an example, not ours: it is not looked for."""
    found = []
    folders = _folders(files)
    for match in NAMED.finditer(text):
        name = match.group(1).lstrip("./")
        if "/" in name and name.split("/", 1)[0] not in folders:
            continue
        if not any(path == name or path.endswith("/" + name) for path in files):
            found.append((text.count("\n", 0, match.start()) + 1, match.group(1)))
    return found


def test_every_source_file_a_page_names_exists():
    files = _repository_files()
    missing = [f"{page.relative_to(ROOT)}:{line}: `{name}`"
               for page in _pages() for line, name in _missing(page.read_text(), files)]
    assert not missing, "pages name files that do not exist:\n" + "\n".join(missing)


def test_a_moved_files_old_name_is_caught_and_its_new_one_passes():
    files = ["wurk_django/server/run/processor.py", "wurk_django/lua/fire.lua"]
    text = ("See `server/processor.py`,\nthen `run/processor.py`, `processor.py` and `lua/fire.lua`; not `fire2.lua`"
            " nor `server/fetch_slot.py`; `myapp/limits.py` is the user's.")
    assert _missing(text, files) == [(1, "server/processor.py"), (2, "fire2.lua"), (2, "server/fetch_slot.py")]
