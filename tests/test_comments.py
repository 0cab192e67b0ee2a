"""Comments state the rule in words; a requirement ID may follow, never stand alone (issue 24 item 7).

What is read: in ``wurk_django/**/*.py`` every ``#`` comment and every docstring (module,
class, function); in ``wurk_django/**/*.lua`` every ``--`` comment.

How it is cut: comments on consecutive lines that start at the same column form one
block, a comment after code is a block of its own, a docstring is one block. A block is
cut into sentences at ``.``, ``!`` or ``?`` followed by white space (not after an ellipsis,
"e.g." or "i.e."), at blank lines and
after a ruler (three dashes or more ending a line, as section headers have).
A requirement ID is ``CORE-``, ``PRO-``, ``ENT-``, ``RUN-``, ``DJ-`` or ``SEED-`` and a
number, with an optional range (``ENT-401..415``).

A sentence that holds an ID offends when either

- after taking out the IDs, punctuation, brackets and code quotes, fewer than three
  meaningful words are left: a word is two letters or more, and the words
  :data:`FILLER` (articles, prepositions, "see", "per", "spec" ...) do not count; so
  ``# DJ-055``, ``# UI limit (CORE-242)`` and ``# -- periodic jobs (ENT-401..415) --``
  offend, while ``# before the manager may close the pool (RUN-122)`` does not; or
- the ID is given as the reason: ``see ID``, ``per ID``, ``cf. ID``, ``according to ID``,
  ``as in ID``, ``required/mandated/specified/defined by ID``, ``as ID requires`` or
  ``ID requires/says/demands/mandates/wants/specifies``.

Each offence is reported as the file and line where its ID stands.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

from tests.support import PACKAGE

REQUIREMENT = re.compile(r"\b(?:CORE|PRO|ENT|RUN|DJ|SEED)-\d+(?:\s*(?:\.\.|–|—)\s*\d+)?")
FILLER = frozenset("""
    a an the of to in on at by for from with and or nor but as is are be it its this that these those
    see per cf also here there spec specs requirement requirements section sections item items rule
    """.split())
_WORD = re.compile(r"[^\W\d_]{2,}")
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!\.\.)(?<!\be\.g\.)(?<!\bi\.e\.)\s+|\n\s*\n|-{3,}\s*(?:\n|$)")
_VERBS = r"requires?|says|demands?|mandates?|wants|specifies|describes"
_ID = r"\x00+"  # an ID, once masked
REASON = re.compile(
    rf"\b(?:see|per|cf\.?|according\s+to|as\s+in|(?:required|mandated|specified|defined)\s+by)\s+\(?{_ID}"
    rf"|\bas\s+{_ID}\s+(?:{_VERBS})\b|{_ID}\s+(?:{_VERBS})\b",
    re.IGNORECASE,
)

#: Files left out of the check (none: every file holds to the rule).
ALLOWED: frozenset[str] = frozenset()

Block = list[tuple[int, str]]  # (line number, text) per line
Comment = tuple[int, int, bool, str]  # line number, column, alone on its line, text


def _group(comments: Iterable[Comment]) -> list[Block]:
    """Comments alone on consecutive lines at one column make one block; any other is a block of its own."""
    blocks: list[Block] = []
    previous: tuple[int, int] | None = None
    for line, column, own_line, text in comments:
        if own_line and previous == (line - 1, column):
            blocks[-1].append((line, text))
        else:
            blocks.append([(line, text)])
        previous = (line, column) if own_line else None
    return blocks


def _docstrings(source: str) -> list[Block]:
    blocks: list[Block] = []
    lines = source.splitlines()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                raw = lines[first.lineno - 1:first.end_lineno]
                text = [re.sub(r'[rRuU]?("""|\'\'\'|"|\')', " ", line) for line in raw]
                blocks.append([(first.lineno + i, line) for i, line in enumerate(text)])
    return blocks


def _python_comments(source: str) -> Iterator[Comment]:
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            line, column = token.start
            yield line, column, not token.line[:column].strip(), token.string.lstrip("#:").strip()


def _lua_comments(source: str) -> Iterator[Comment]:
    for number, line in enumerate(source.splitlines(), 1):
        quote = None
        for i, char in enumerate(line):
            if quote:
                if char == quote and line[i - 1] != "\\":
                    quote = None
            elif char in "'\"":
                quote = char
            elif line.startswith("--", i):
                yield number, i, not line[:i].strip(), line[i:].lstrip("-[").strip()
                break


def blocks_of(path: Path) -> list[Block]:
    source = path.read_text()
    if path.suffix == ".lua":
        return _group(_lua_comments(source))
    return _docstrings(source) + _group(_python_comments(source))


def offences(block: Block) -> list[int]:
    """Line numbers of the IDs in ``block`` that stand alone or stand as the reason."""
    text = "\n".join(line for _, line in block)
    starts = []  # offset where each line starts in ``text``
    offset = 0
    for _, line in block:
        starts.append(offset)
        offset += len(line) + 1
    masked = REQUIREMENT.sub(lambda m: "\x00" * len(m.group()), text)
    found = []
    bounds = [0]
    for gap in _SENTENCE_END.finditer(masked):
        bounds += [gap.start(), gap.end()]
    bounds.append(len(masked))
    for begin, end in zip(bounds[::2], bounds[1::2]):
        piece = masked[begin:end]
        if "\x00" not in piece:
            continue
        words = [w for w in _WORD.findall(piece) if w.lower() not in FILLER]
        if len(words) >= 3 and not REASON.search(piece):
            continue
        for match in re.finditer(r"\x00+", piece):
            at = begin + match.start()
            index = max(i for i, start in enumerate(starts) if start <= at)
            found.append(block[index][0])
    return sorted(set(found))


def scan(root: Path = PACKAGE) -> dict[str, list[int]]:
    """Every offending line under ``root``, per file (relative to ``root``)."""
    result: dict[str, list[int]] = {}
    for path in sorted([*root.rglob("*.py"), *root.rglob("*.lua")]):
        lines = sorted({line for block in blocks_of(path) for line in offences(block)})
        if lines:
            result[str(path.relative_to(root))] = lines
    return result


@pytest.mark.parametrize("source, suffix, bad", [
    ("X = 200  # DJ-055\n", ".py", [1]),
    ("LIMIT = 180  # UI limit (CORE-242)\n", ".py", [1]),
    ("# -- periodic jobs (ENT-401..415) ------\n", ".py", [1]),
    ("# -- rate limiters (ENT-110) ------\n# The Ruby wurk layout, shared by name.\n", ".py", [1]),
    ("def f():\n    '''Reads the set (see CORE-107).'''\n", ".py", [2]),
    ("x = 1  # per PRO-110\n", ".py", [1]),
    ("# Fork before threads start, as RUN-302 requires.\n", ".py", [1]),
    ('"""Module words.\n\nCORE-198, CORE-199.\n"""\n', ".py", [3]),
    ("-- KEYS[1] queue (CORE-104)\nlocal x = 1 -- ENT-206\n", ".lua", [1, 2]),
    # fine: the rule in words, the ID after it
    ("flush()  # before the manager may close the pool (RUN-122)\n", ".py", []),
    ('"""Dashboard page and the JSON and Prometheus\nendpoints (CORE-190, DJ-054)."""\n', ".py", []),
    ("# A lost reply is never replayed for LPUSH:\n# it would push twice (ENT-006).\n", ".py", []),
    ("# RUN-303: stop() returns only after every thread ended.\n", ".py", []),
    ("-- A retried job counts once as failed (PRO-274).\n", ".lua", []),
    ('"""Seconds to wait: 1, 2, 4 ... capped at 30 (ENT-706)."""\n', ".py", []),
    ("s = 'CORE-107'  # a string, not a comment, so never read\n", ".py", []),
])
def test_the_checker_tells_a_rule_from_a_bare_id(tmp_path, source, suffix, bad):
    (tmp_path / f"sample{suffix}").write_text(source)
    assert scan(tmp_path).get(f"sample{suffix}", []) == bad


def test_comments_state_the_rule_in_words():
    found = {path: lines for path, lines in scan().items() if path not in ALLOWED}
    report = "\n".join(f"{path}: lines {', '.join(map(str, lines))}" for path, lines in found.items())
    assert found == {}, f"comments that cite a requirement ID instead of the rule:\n{report}"
