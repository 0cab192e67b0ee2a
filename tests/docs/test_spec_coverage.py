"""docs/spec-coverage.md, the requirement-by-requirement audit, stays consistent (issue 31 item 8).

The specification is not part of the repository, so these checks cannot tell whether a
row is right. They hold what can be held without it: every requirement has one
well-formed row under the spec file its prefix names, every status is one of the five
words, every path the page names exists, a finished row names a test file that exists and
says it checks the requirement, its ID in a test's name, a docstring or a comment (issue
41 item 7), a row that is not finished says why in words, and the summary counts and the "not full" lists are those of the rows.
"""

from __future__ import annotations

import ast
import functools
import io
import re
import tokenize
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
PAGE = ROOT / "docs" / "spec-coverage.md"

PREFIXES = {"core.md": "CORE", "pro.md": "PRO", "ent.md": "ENT", "runtime.md": "RUN", "django.md": "DJ"}
STATUSES = ("full", "partial", "deviation", "missing", "in progress")
ID = re.compile(r"^(CORE|PRO|ENT|RUN|DJ)-\d{3}$")
# A path is a backquoted token naming a file or folder of the repository.
PATH = re.compile(r"`((?:wurk_django|tests|docs|bench)/[^`\s]*|README\.md)`")
TESTS_OR_DOCS = ("tests/", "docs/", "bench/", "README.md")


def _cells(line: str) -> list[str]:
    # A table row; a literal bar inside a cell is written ``\|``.
    return [cell.strip().replace("\\|", "|") for cell in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def _status(cell: str) -> str:
    return "in progress" if cell.startswith("in progress") else cell


def _parse() -> tuple[dict[str, list[list[str]]], list[list[str]], dict[str, list[str]]]:
    """(rows by spec file, summary rows, the "not full" lists by status)."""
    rows: dict[str, list[list[str]]] = {name: [] for name in PREFIXES}
    summary: list[list[str]] = []
    lists: dict[str, list[str]] = {}
    current = None
    for line in PAGE.read_text().splitlines():
        heading = re.match(r"^## (\S+)", line)
        if heading:
            current = heading.group(1).rstrip(":")
            continue
        listed = re.match(r"^\* (partial|deviation|missing|in progress): (.*)$", line)
        if listed and current == "Summary":
            ids = listed.group(2)
            lists[listed.group(1)] = [] if ids == "none" else [i.strip() for i in ids.split(",")]
            continue
        if not line.startswith("| ") or line.startswith("|---"):
            continue
        cells = _cells(line)
        if current == "Summary":
            if cells[0] != "spec file":
                summary.append(cells)
        elif current in rows and cells[0] != "ID":
            rows[current].append(cells)
    return rows, summary, lists


ROWS, SUMMARY, LISTS = _parse()
ALL = [row for name in PREFIXES for row in ROWS[name]]


def test_every_spec_file_has_its_rows_and_each_row_four_cells():
    for name, rows in ROWS.items():
        assert rows, f"no rows under '## {name}'"
        for row in rows:
            assert len(row) == 4 and all(row), f"{name}: a row needs ID, asks, status, where: {row}"


def test_ids_are_well_formed_unique_and_under_their_own_spec_file():
    for name, rows in ROWS.items():
        for row in rows:
            assert ID.match(row[0]), f"{name}: {row[0]!r} is not an ID like CORE-104"
            assert row[0].split("-")[0] == PREFIXES[name], f"{row[0]} is listed under {name}"
    twice = [i for i, n in Counter(row[0] for row in ALL).items() if n > 1]
    assert not twice, f"IDs with more than one row: {twice}"


def test_each_status_is_one_of_the_five_words():
    for row in ALL:
        assert _status(row[2]) in STATUSES, f"{row[0]}: unknown status {row[2]!r}"


def _where(path: str) -> Path:
    # wurk_django/ is the package the suite imports: the checkout's, or an installed wheel's.
    from tests.support import PACKAGE

    return PACKAGE.parent / path if path.startswith("wurk_django/") else ROOT / path


def test_every_path_named_exists():
    missing = [(row[0], path) for row in ALL for path in PATH.findall(row[3]) if not _where(path).exists()]
    assert not missing, f"paths that do not exist: {missing}"


def test_a_full_row_names_what_does_it_and_what_shows_it():
    for row in ALL:
        if _status(row[2]) != "full":
            continue
        paths = PATH.findall(row[3])
        assert paths, f"{row[0]}: a full row names its module and test"
        assert any(p.startswith(TESTS_OR_DOCS) for p in paths), f"{row[0]}: no test or page shows it"


@functools.cache
def _docstrings(source: str) -> str:
    """The module's, its classes' and its tests' docstrings, as one text."""
    said, todo = [], [ast.parse(source)]
    while todo:  # the module, its classes and functions, and theirs: not every expression
        node = todo.pop()
        said.append(ast.get_docstring(node) or "")
        todo += [child for child in node.body
                 if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
    return "\n".join(said)


def _in_a_comment(line: str, requirement: str) -> bool:
    # The line alone is enough to find its comment; a line inside a multi-line string
    # does not tokenize (or gives no comment), and docstrings are read apart.
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(line.strip() + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return False
    return any(tok.type == tokenize.COMMENT and re.search(rf"{requirement}(?!\d)", tok.string) for tok in tokens)


def _says(source: str, requirement: str) -> bool:
    """Whether a test module says it checks ``requirement``: the ID in a test's (or a
    class's) name (``test_core_153_...``), in a comment or in a docstring. An ID only
    inside a string the test uses as data, or in code, does not count: it does not say
    what the test checks."""
    as_name = requirement.lower().replace("-", "_")
    if re.search(rf"^\s*(?:async\s+)?(?:def|class)\s+(?:\w*_)?{as_name}(?:_\w*)?\s*[(:]", source,
                 re.MULTILINE | re.IGNORECASE):
        return True
    if requirement not in source:
        return False
    if any(_in_a_comment(line, requirement) for line in source.splitlines() if requirement in line):
        return True
    return re.search(rf"{requirement}(?!\d)", _docstrings(source)) is not None


def _names_the_id(path: str, requirement: str) -> bool:
    """A named test file (not a folder: a row names the file that checks it) says it
    checks ``requirement``."""
    where = ROOT / path
    return where.is_file() and where.suffix == ".py" and _says(where.read_text(errors="replace"), requirement)


@pytest.mark.parametrize("source, says", [
    ("def test_core_153_slow_beats_warn():\n    pass\n", True),
    ('def test_warns():\n    """CORE-153: five slow beats warn."""\n', True),
    ('"""Slow beats (CORE-153)."""\n', True),
    ("def test_warns():  # CORE-153\n    pass\n", True),
    ('def test_warns():\n    assert label("CORE-153")\n', False),
    ("def test_core_1530():\n    pass\n", False),
    ("def test_warns():  # CORE-1530\n    pass\n", False),
    ("def test_warns():\n    pass\n", False),
])
def test_the_check_reads_names_docstrings_and_comments_only(source, says):
    assert _says(source, "CORE-153") is says


def test_a_full_row_names_a_test_that_names_the_requirement():
    """A full row's test must say which requirement it checks (its ID in the test's name,
    docstring or a comment), so a maintainer who breaks it learns which row to update.
    A page (docs/, README.md) does not count: it documents, it does not check."""
    unnamed = []
    for row in ALL:
        if _status(row[2]) != "full":
            continue
        tests = [p for p in PATH.findall(row[3]) if p.startswith(("tests/", "bench/"))]
        if not any(_names_the_id(p, row[0]) for p in tests):
            unnamed.append(row[0])
    assert not unnamed, f"full rows whose named tests never mention the ID: {unnamed}"


def test_a_row_not_full_says_why_in_words():
    for row in ALL:
        if _status(row[2]) == "full":
            continue
        words = re.findall(r"[a-z]{3,}", re.sub(r"`[^`]*`", "", row[3]))
        assert len(words) >= 3, f"{row[0]} ({row[2]}): say what is missing or decided, not only where"


def test_summary_counts_are_those_of_the_rows():
    by_file = {cells[0]: cells[1:] for cells in SUMMARY}
    assert set(by_file) == {*PREFIXES, "all"}
    total = Counter()
    for name, rows in ROWS.items():
        counts = Counter(_status(row[2]) for row in rows)
        total.update(counts)
        assert by_file[name] == [str(len(rows)), *(str(counts[s]) for s in STATUSES)], f"summary of {name}"
    assert by_file["all"] == [str(len(ALL)), *(str(total[s]) for s in STATUSES)], "summary total"


def test_the_not_full_lists_are_those_of_the_rows():
    for status in STATUSES[1:]:
        assert LISTS.get(status) == [row[0] for row in ALL if _status(row[2]) == status], status


@pytest.mark.parametrize("page", ["README.md", "docs/architecture.md"])
def test_the_page_is_linked(page):
    assert "spec-coverage.md" in (ROOT / page).read_text()
