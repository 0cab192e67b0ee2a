"""celery_tasks.py's source run with only its imports changed to wurk_django.celery, and its
Celery-only lines (the project's Celery app) deleted, as docs/from-celery.md says to."""

from __future__ import annotations

from pathlib import Path

from tests.celery_guide.moved import moved_source

exec(compile(moved_source(Path(__file__).with_name("celery_tasks.py")), __file__, "exec"))  # noqa: S102
