"""Django project for the ORM shape of the benchmark (bench/orm.py): one model, one job body, five systems."""

import os

if os.environ.get("BENCH_ORM_SYSTEM") == "celery":
    # Celery's documented Django layout: the project package loads the app so @shared_task binds to it.
    from .celery import app as celery_app  # noqa: F401
