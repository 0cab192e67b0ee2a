"""The ``CELERY_*`` settings a Celery project has, and what each becomes on wurk.

Read (Django settings, Celery's ``namespace="CELERY"`` names):

===============================  ==============================================================
``CELERY_BEAT_SCHEDULE``         periodic loops (:mod:`.beat`), fired by the cluster's leader
``CELERY_TIMEZONE``              the zone of those loops (default Django's ``TIME_ZONE``)
``CELERY_TASK_ROUTES``           a task's queue by its name (a dict of names or globs, a list of
                                 such dicts, or router functions)
``CELERY_TASK_DEFAULT_QUEUE``    the queue of a task with no ``queue=`` and no route
``CELERY_TASK_ALWAYS_EAGER``     ``delay``/``apply_async`` run the task here (``apply()``)
``CELERY_TASK_EAGER_PROPAGATES`` with it, the task's error is raised at the call
``CELERY_TASK_TIME_LIMIT``       the default ``time_limit`` of every task (seconds)
``CELERY_TASK_SOFT_TIME_LIMIT``  the default ``soft_time_limit``
``CELERY_RESULT_EXPIRES``        the default ``result_expires`` (seconds or a timedelta)
===============================  ==============================================================

Any other ``CELERY_*`` setting is named by a ``manage.py check`` warning
(:mod:`.checks`) saying what happens to it.
"""

from __future__ import annotations

import datetime as dt
import fnmatch
import re
from collections.abc import Mapping
from typing import Any

#: Settings this module reads (without the ``CELERY_`` prefix).
READ = frozenset({"BEAT_SCHEDULE", "TIMEZONE", "TASK_ROUTES", "TASK_DEFAULT_QUEUE", "TASK_ALWAYS_EAGER",
                  "TASK_EAGER_PROPAGATES", "TASK_TIME_LIMIT", "TASK_SOFT_TIME_LIMIT", "RESULT_EXPIRES"})


#: Values set on ``current_app.conf`` (:mod:`.app`) in this process, by setting suffix: they
#: win over Django's settings, as values set on Celery's ``app.conf`` do.
OVERRIDES: dict[str, Any] = {}


def setting(name: str, default: Any = None) -> Any:
    """``current_app.conf``'s value of ``name`` where one was set, else
    ``settings.CELERY_<name>``, or ``default`` (also without Django settings)."""
    from django.conf import settings

    if name in OVERRIDES:
        return OVERRIDES[name]
    if not settings.configured:
        return default
    return getattr(settings, f"CELERY_{name}", default)


def seconds(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, dt.timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ValueError(f"CELERY_{name} must be seconds >= 0 or a timedelta, not {value!r}")
    return value


def routed_queue(task_name: str, args: Any = None, kwargs: Any = None) -> str | None:
    """The queue ``CELERY_TASK_ROUTES`` gives ``task_name``, or ``None``. The first route
    that answers wins, as in Celery: a dict maps exact names, globs (``"shop.*"``) and
    compiled regexes to ``{"queue": ...}`` (or a queue name); a function is called as
    Celery calls a router, ``router(name, args, kwargs, options, task=None)``."""
    routes = setting("TASK_ROUTES")
    if not routes:
        return None
    for route in routes if isinstance(routes, (list, tuple)) else [routes]:
        found = _route(route, task_name, args, kwargs)
        if found is not None:
            return found
    return None


def _route(route: Any, name: str, args: Any, kwargs: Any) -> str | None:
    if isinstance(route, str):
        from django.utils.module_loading import import_string

        route = import_string(route)
    if callable(route) and not isinstance(route, Mapping):
        return _queue_of(route(name, args or (), kwargs or {}, {}, task=None))
    if not isinstance(route, Mapping):
        raise ValueError(f"CELERY_TASK_ROUTES entries must be dicts or router functions, not {route!r}")
    if name in route:
        return _queue_of(route[name])
    for pattern, target in route.items():
        if isinstance(pattern, re.Pattern):
            if pattern.match(name):
                return _queue_of(target)
        elif isinstance(pattern, str) and any(c in pattern for c in "*?[") and fnmatch.fnmatchcase(name, pattern):
            return _queue_of(target)
    return None


def _queue_of(target: Any) -> str | None:
    if target is None:
        return None
    if isinstance(target, str):
        return target
    if isinstance(target, Mapping):
        queue = target.get("queue")
        if isinstance(queue, Mapping):  # Celery also accepts a queue declaration
            queue = queue.get("name")
        return queue
    raise ValueError(f"a CELERY_TASK_ROUTES target must be a queue name or {{'queue': name}}, not {target!r}")


def default_queue() -> str | None:
    return setting("TASK_DEFAULT_QUEUE")


def always_eager() -> bool:
    return bool(setting("TASK_ALWAYS_EAGER", False))


def eager_propagates() -> bool:
    return bool(setting("TASK_EAGER_PROPAGATES", False))


def time_limits() -> dict[str, float]:
    """The default ``time_limit`` / ``soft_time_limit`` of every task, where set."""
    out = {}
    for key, name in (("time_limit", "TASK_TIME_LIMIT"), ("soft_time_limit", "TASK_SOFT_TIME_LIMIT")):
        value = seconds(name, setting(name))
        if value:
            out[key] = value
    return out


def result_expires() -> float | None:
    return seconds("RESULT_EXPIRES", setting("RESULT_EXPIRES"))
