"""Job names: which Python job answers to a payload's ``class`` string (CORE-041..045).

Every :class:`~wurk_django.job.Job` subclass registers itself under its dotted
path (``shop.jobs.SendEmail``) and, if it sets ``name``, under that name too,
so a job can consume what a Ruby Sidekiq app pushes as ``"SendEmail"``.

Payloads never make us import arbitrary modules (CORE-044): on a miss we import
only modules inside an allowed prefix (``WURK["IMPORT_ON_MISS"]``, by default the
installed apps' packages), and the object found must be a registered job.
"""

from __future__ import annotations

import importlib
import sys
import threading
from typing import TYPE_CHECKING

from . import context
from .errors import UnknownJobClass

if TYPE_CHECKING:
    from .conf import Config
    from .job import Job

_jobs: dict[str, type[Job]] = {}
_lock = threading.Lock()


def register(job_class: type[Job], *names: str) -> None:
    with _lock:
        for name in names:
            if not name:
                continue
            if "|" in name:
                raise ValueError(f"job name {name!r} must not contain '|'")
            existing = _jobs.get(name)
            if existing is not None and existing is not job_class and _path(existing) != _path(job_class):
                raise ValueError(f"job name {name!r} is taken by {_path(existing)}")
            _jobs[name] = job_class


def _path(job_class: type) -> str:
    return f"{job_class.__module__}.{job_class.__qualname__}"


def registered() -> dict[str, type[Job]]:
    return dict(_jobs)


def _allowed_prefixes(config: Config | None = None) -> list[str]:
    from django.apps import apps

    configured = context.config(config).import_on_miss
    if configured is not None:
        return list(configured)
    if not apps.ready:  # a worker run from a Config without Django apps: nothing is implied
        return []
    return [app.name for app in apps.get_app_configs()]


def may_import(module_name: str, config: Config | None = None) -> bool:
    """True when a payload may cause ``module_name`` to be imported.

    Only modules inside an allowed prefix qualify, or modules this process has
    imported already (importing those again runs no code).
    """
    if not module_name:
        return False
    if module_name in sys.modules:
        return True
    return any(module_name == p or module_name.startswith(p + ".") for p in _allowed_prefixes(config))


def resolve(name: str, config: Config | None = None) -> type[Job]:
    """The job class for ``name``; raises :class:`UnknownJobClass` when there is none.
    An unknown name is imported from its module when ``config``'s ``IMPORT_ON_MISS``
    (or the installed apps) allow that module."""
    found = _jobs.get(name)
    if found is not None:
        return found
    module_name = name.rpartition(".")[0]
    if module_name and may_import(module_name, config):
        try:
            importlib.import_module(module_name)
        except ImportError as exc:
            raise UnknownJobClass(f"cannot import job module {module_name!r} for {name!r}: {exc}") from exc
        found = _jobs.get(name)
        if found is not None:
            return found
    raise UnknownJobClass(
        f"no job is registered as {name!r}: define it in an installed app's jobs.py, "
        "or give a Job subclass name = " + repr(name)
    )
