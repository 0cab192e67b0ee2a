"""``current_app``: what Celery code reaches through its app object, without an app.

A wurk project has no ``Celery()`` instance (``proj/celery.py`` is deleted), but code and
tests written for Celery read and set the configuration through ``celery.current_app.conf``
(``current_app.conf.task_always_eager = True`` in a test's ``setUp`` is the common case).
``current_app.conf`` answers in Celery's lowercase names for the settings wurk reads
(:data:`.django_settings.READ`): a value set on it wins over ``settings.CELERY_<NAME>``
for this process, as a value set on Celery's ``app.conf`` wins over the Django setting; any
other name is refused with what happens to that setting on wurk (the ``wurk.W030`` text).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from . import django_settings


def _setting_name(name: str) -> str:
    """Celery's ``task_always_eager`` -> the ``CELERY_`` setting's suffix ``TASK_ALWAYS_EAGER``."""
    return name.upper()


class Conf:
    """``current_app.conf``: the ``CELERY_*`` settings wurk reads, by Celery's names."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        key = self._known(name)
        return django_settings.setting(key, _DEFAULTS.get(key))

    def __setattr__(self, name: str, value: Any) -> None:
        django_settings.OVERRIDES[self._known(name)] = value

    def __delattr__(self, name: str) -> None:
        django_settings.OVERRIDES.pop(self._known(name), None)

    def __getitem__(self, name: str) -> Any:
        return getattr(self, name)

    def __setitem__(self, name: str, value: Any) -> None:
        setattr(self, name, value)

    def get(self, name: str, default: Any = None) -> Any:
        """The value of ``name``, or ``default`` where it is not set."""
        return django_settings.setting(self._known(name), default)

    def update(self, other: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        """Set several names at once (each checked as ``conf.name = value`` is)."""
        for name, value in {**dict(other or {}), **kwargs}.items():
            setattr(self, name, value)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(name.lower() for name in django_settings.READ))

    @staticmethod
    def _known(name: str) -> str:
        key = _setting_name(name)
        if key in django_settings.READ:
            return key
        from .checks import NOT_READ

        what = NOT_READ.get(key, "wurk_django does not read it")
        raise AttributeError(f"current_app.conf.{name}: {what}; the settings wurk reads are "
                             f"{', '.join(sorted(n.lower() for n in django_settings.READ))} (docs/from-celery.md)")


#: Celery's defaults of the settings wurk reads, where the default is not "unset".
_DEFAULTS = {"TASK_ALWAYS_EAGER": False, "TASK_EAGER_PROPAGATES": False}


class App:
    """``celery.current_app`` / ``app``: the configuration (``conf``) and the tasks by name."""

    main = "wurk_django"

    def __init__(self) -> None:
        self.conf = Conf()

    @property
    def tasks(self) -> dict[str, Any]:
        """Every Celery-style task imported so far, by name (Celery's ``app.tasks``)."""
        from ..registry import registered
        from .job import CeleryJob

        return {name: cls.task_object() for name, cls in registered().items()
                if isinstance(cls, type) and issubclass(cls, CeleryJob)}

    def __repr__(self) -> str:
        return "<wurk_django.celery current_app>"


#: The one app object: ``from wurk_django.celery import current_app``.
current_app = App()
