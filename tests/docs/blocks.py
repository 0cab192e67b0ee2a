"""Fenced code blocks of README.md and docs/*.md, with the directive a writer put above each.

A directive is an HTML comment on the nearest non-blank line above the opening fence
(invisible on a rendered page)::

    <!-- doc-test: fragment: the user's own systemd unit -->

Kinds:

* ``fragment: <why>`` - not run; the reason is required, so a block is left out on purpose;
* ``settings`` - run alone; every ``WURK`` it defines must pass the settings checks;
* ``run`` - run in the page's namespace, in page order (the default for ``python``);
* ``output`` - what a previous block printed or a shell shows; checked for nothing but
  needs no other mark (a ``>>>`` session is this);
* ``file: <path>`` - a copy of a file of the repository (``docs/deploy/wurk.service``),
  which must equal it character for character; ``file: <path> lines <a>-<b>`` shows
  lines a to b of it. The file itself is what a test checks (tests/docs/test_deploy.py),
  so the page cannot drift from what was tested.

``json`` blocks must parse. Any other language (``sh``, ``yaml``, ``ini``, ``html``)
needs a directive: a shell line is run by the reader, not by the suite.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```(\w*)\s*$")
_DIRECTIVE = re.compile(r"^<!--\s*doc-test:\s*(\w+)\s*(?::\s*(.*?))?\s*-->\s*$")
KINDS = ("fragment", "settings", "run", "output", "file")
_FILE = re.compile(r"^(?P<path>\S+)(?:\s+lines\s+(?P<first>\d+)-(?P<last>\d+))?$")


@dataclass(frozen=True)
class Block:
    page: str  # path relative to the repository root
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    kind: str | None  # the directive's kind, None when there is none
    reason: str

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    def shown_file(self) -> tuple[Path, str]:
        """A ``file:`` block's file and the text it must show (the whole file, or the lines named)."""
        match = _FILE.match(self.reason)
        if not match:
            raise ValueError(f"{self.where}: write `file: <path>` or `file: <path> lines <a>-<b>`")
        path = ROOT / match.group("path")
        text = path.read_text()
        if match.group("first"):
            text = "\n".join(text.splitlines()[int(match.group("first")) - 1:int(match.group("last"))])
        return path, text.rstrip("\n")

    @property
    def file(self) -> str:
        """The path a ``file:`` block names, without its line range."""
        return self.reason.split()[0] if self.reason else ""


def blocks(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and not lines[end].startswith("```"):
            end += 1
        kind, reason = None, ""
        above = i - 1
        while above >= 0 and not lines[above].strip():
            above -= 1
        if above >= 0:
            directive = _DIRECTIVE.match(lines[above].strip())
            if directive:
                kind, reason = directive.group(1), (directive.group(2) or "").strip()
        found.append(Block(str(path.relative_to(ROOT)), i + 1, match.group(1), "\n".join(lines[i + 1:end]),
                           kind, reason))
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [block for page in PAGES for block in blocks(page)]
