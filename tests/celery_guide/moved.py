"""The import change a Celery project makes to move: ``celery`` becomes ``wurk_django.celery``,
the project's Celery app goes; nothing else in the source changes."""

from __future__ import annotations

import re
from pathlib import Path

_IMPORT = re.compile(r"^(\s*)(from|import) celery\b", re.M)


def moved_source(path: Path, renames: dict[str, str] | None = None) -> str:
    """``path``'s source with every ``from celery...``/``import celery...`` pointed at
    wurk_django.celery, the lines marked ``# celery only`` dropped, and ``renames`` (module
    paths of the examples' own modules) applied."""
    lines = [line for line in path.read_text().splitlines() if not line.rstrip().endswith("celery only")]
    text = _IMPORT.sub(lambda m: f"{m.group(1)}{m.group(2)} wurk_django.celery", "\n".join(lines) + "\n")
    for old, new in (renames or {}).items():
        text = text.replace(old, new)
    return text
