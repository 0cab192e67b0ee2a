"""A ``django.tasks`` backend on wurk (Django >= 6.0, or 5.2 with the ``django-tasks`` backport).

::

    TASKS = {"default": {"BACKEND": "wurk_django.tasks.WurkBackend",
                         "OPTIONS": {"RESULT_TTL": 86400, "RETRY": True}}}

Tasks are pushed as ordinary Sidekiq jobs of class ``wurk_django.tasks.TaskJob``
(the task's path is in the payload's ``wrapped``), run by ``manage.py wurk``,
and report their results through Redis. See docs/django.md.

On Django 5.2 it runs on the ``django-tasks`` backport (``pip install
"wurk-django[tasks]"`` and ``"django_tasks"`` in ``INSTALLED_APPS``);
:mod:`.compat` picks the framework. Without either, this package imports
cleanly and exports nothing else.
"""

from .compat import AVAILABLE

__all__ = ["AVAILABLE"]

if AVAILABLE:
    from .backend import InvalidDeadline, WurkBackend, WurkTask, task
    from .job import TaskJob

    __all__ += ["InvalidDeadline", "TaskJob", "WurkBackend", "WurkTask", "task"]
