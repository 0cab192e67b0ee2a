"""celery_base_tasks.py's source with only its imports changed (see wurk_tasks.py)."""

from __future__ import annotations

from pathlib import Path

from tests.celery_guide.moved import moved_source

exec(compile(moved_source(Path(__file__).with_name("celery_base_tasks.py"),  # noqa: S102
                          {"tests.celery_guide.celery_tasks": "tests.celery_guide.wurk_tasks"}), __file__, "exec"))
