"""celery_tasks.py's source run with only its imports changed to wurk_django.celery (moved.py)."""

from tests.celery_guide.moved import run_moved

run_moved(globals(), __file__)
