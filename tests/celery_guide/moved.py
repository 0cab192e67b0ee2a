"""The import change a Celery project makes to move: ``celery`` becomes ``wurk_django.celery``,
the project's Celery app goes; nothing else in the source changes."""

from __future__ import annotations

import re
from pathlib import Path

_IMPORT = re.compile(r"^(\s*)(from|import) celery\b", re.M)
#: The examples' own modules: each celery_X.py has its moved twin wurk_X.py.
_OWN = re.compile(r"\btests\.celery_guide\.celery_")


def moved_source(path: Path) -> str:
    """``path``'s source with every ``from celery...``/``import celery...`` pointed at
    wurk_django.celery, the lines ending in ``celery only`` dropped, and the examples' own
    ``celery_X`` modules replaced by their moved ``wurk_X`` twins."""
    lines = [line for line in path.read_text().splitlines() if not line.rstrip().endswith("celery only")]
    text = _IMPORT.sub(lambda m: f"{m.group(1)}{m.group(2)} wurk_django.celery", "\n".join(lines) + "\n")
    return _OWN.sub("tests.celery_guide.wurk_", text)


def run_moved(namespace: dict, wurk_file: str) -> None:
    """Run the Celery twin of ``wurk_file`` (wurk_X.py -> celery_X.py), moved, in ``namespace``."""
    path = Path(wurk_file)
    source = path.with_name(path.name.replace("wurk_", "celery_", 1))
    exec(compile(moved_source(source), wurk_file, "exec"), namespace)  # noqa: S102
