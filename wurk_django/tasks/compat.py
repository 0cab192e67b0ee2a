"""The one place that imports a Tasks framework: Django's own, else the backport.

In this order:

1. ``django.tasks``, part of Django since 6.0;
2. ``django_tasks``, the ``django-tasks`` backport from PyPI (>= 0.12), for
   Django 5.2: ``pip install "wurk-django[tasks]"``;
3. neither: ``AVAILABLE`` is False and nothing else in this package is
   imported, so ``import wurk_django.tasks`` stays harmless.

Django's own wins even when the backport is installed beside it: the user's
``@task`` objects come from ``django.tasks`` there, and a backend must be of
the same framework as the tasks it runs.

The rest of the package imports these names from here only. Where the two
differ, a shim below says why; the behaviour wurk relies on (``Task`` and
``TaskResult`` fields, ``TaskResultStatus`` members READY/RUNNING/FAILED/
SUCCESSFUL, ``BaseTaskBackend.enqueue(task, args, kwargs)``, ``validate_task``,
priority -100..100, the three signals and their arguments) is the same in
both, checked by tests/tasks/test_compat.py.
"""

from __future__ import annotations

#: Which framework is in use: "django.tasks", "django_tasks" (the backport) or None.
SOURCE: str | None

#: The backport's app label: it registers its system checks (and so our
#: ``WurkBackend.check()``) from its ``AppConfig.ready()``, so it must be in
#: ``INSTALLED_APPS``; Django's own registers them on import.
BACKPORT_APP = "django_tasks"

try:
    from django.tasks import DEFAULT_TASK_BACKEND_ALIAS, DEFAULT_TASK_QUEUE_NAME, task, task_backends
    from django.tasks.backends.base import BaseTaskBackend
    from django.tasks.base import (
        DEFAULT_TASK_PRIORITY,
        Task,
        TaskContext,
        TaskError,
        TaskResult,
        TaskResultStatus,
    )
    from django.tasks.exceptions import (
        InvalidTask,
        InvalidTaskBackend,
        TaskResultDoesNotExist,
        TaskResultMismatch,
    )
    from django.tasks.signals import task_enqueued, task_finished, task_started
    from django.utils.json import normalize_json
except ImportError:  # Django < 6.0
    try:
        from django_tasks import DEFAULT_TASK_BACKEND_ALIAS, DEFAULT_TASK_QUEUE_NAME, task, task_backends
        from django_tasks.backends.base import BaseTaskBackend
        from django_tasks.base import (
            DEFAULT_TASK_PRIORITY,
            Task,
            TaskContext,
            TaskError,
            TaskResult,
            TaskResultStatus,
        )

        # Shim: the backport names its exceptions with an "Error" suffix (InvalidTaskError,
        # InvalidTaskBackendError); Django renamed them when it took the framework in. Same
        # classes, same meaning: one name here for both.
        from django_tasks.exceptions import InvalidTaskBackendError as InvalidTaskBackend
        from django_tasks.exceptions import InvalidTaskError as InvalidTask
        from django_tasks.exceptions import TaskResultDoesNotExist, TaskResultMismatch

        # Importing the signals module also connects the backport's setting_changed receiver
        # (TASKS changes rebuild its backends), which it otherwise connects only in its app's
        # ready(), as Django's own does on import.
        from django_tasks.signals import task_enqueued, task_finished, task_started

        # Shim: Django 5.2 has no django.utils.json.normalize_json (new in 6.0); the backport
        # ships the same function, which its TaskResult uses on args.
        from django_tasks.utils import normalize_json
    except ImportError:
        AVAILABLE = False
        SOURCE = None
    else:
        AVAILABLE = True
        SOURCE = "django_tasks"
else:
    AVAILABLE = True
    SOURCE = "django.tasks"


def describe() -> str:
    """One line for logs and CI: which framework is in use, with its version."""
    if SOURCE is None:
        return "no django.tasks (Django < 6.0 without the django-tasks backport)"
    if SOURCE == "django_tasks":
        import importlib.metadata

        return f"django_tasks {importlib.metadata.version('django-tasks')} (backport)"
    import django

    return f"django.tasks (Django {django.get_version()})"


__all__ = [
    "AVAILABLE",
    "BACKPORT_APP",
    "BaseTaskBackend",
    "DEFAULT_TASK_BACKEND_ALIAS",
    "DEFAULT_TASK_PRIORITY",
    "DEFAULT_TASK_QUEUE_NAME",
    "InvalidTask",
    "InvalidTaskBackend",
    "SOURCE",
    "Task",
    "TaskContext",
    "TaskError",
    "TaskResult",
    "TaskResultDoesNotExist",
    "TaskResultMismatch",
    "TaskResultStatus",
    "describe",
    "normalize_json",
    "task",
    "task_backends",
    "task_enqueued",
    "task_finished",
    "task_started",
]
