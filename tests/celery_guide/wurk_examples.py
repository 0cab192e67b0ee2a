"""celery_examples.py's source run with only its imports changed to wurk_django.celery (and
its task module to wurk_tasks.py, the same tasks moved the same way)."""

from __future__ import annotations

from pathlib import Path

from tests.celery_guide.moved import moved_source

_SOURCE = moved_source(Path(__file__).with_name("celery_examples.py"),
                       {"tests.celery_guide.celery_tasks": "tests.celery_guide.wurk_tasks",
                        "tests.celery_guide.celery_base_tasks": "tests.celery_guide.wurk_base_tasks"})
exec(compile(_SOURCE, __file__, "exec"))  # noqa: S102
