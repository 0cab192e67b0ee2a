"""The settings table: the engine's rows plus the rows each feature declares beside its code.

A built-in feature that has settings puts them in ``wurk_django/<feature>/settings.py``
as ``ROWS``, a tuple of :class:`~wurk_django.conf.setting.Setting`; the table takes
them from every name in :data:`wurk_django.features.BUILTIN` that has such a module.
``DEFAULTS``, :func:`~wurk_django.conf.problems` (so the system checks and the
worker's boot check), the typed attributes of ``Config`` and the tables in
docs/configuration.md all come from this one table.

It is collected the first time it is asked for, not when ``wurk_django.conf`` is
imported: a feature's package may itself import ``wurk_django.conf``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from importlib import resources
from typing import Any

from ..errors import ConfigurationError
from .setting import Setting

#: Modules outside the built-in features that own rows, collected first.
ENGINE_MODULES: tuple[str, ...] = ("wurk_django.conf.core",)

#: Attributes ``Config`` sets itself (its Redis target and shard): no row may fill them.
RESERVED = frozenset({"raw", "shard", "shard_spec", "redis_target", "redis_url", "redis_options",
                      "redis_cache_alias", "for_shard", "queue_mode", "queue_names"})


class Table:
    """A checked set of rows, with what is derived from them."""

    def __init__(self, rows: Iterable[Setting]) -> None:
        self.settings: tuple[Setting, ...] = tuple(rows)
        self.by_name: dict[str, Setting] = {}
        #: Every key the WURK dict may hold, with its default.
        self.defaults: dict[str, Any] = {}
        #: ``(attribute, key, parse)`` for each row that fills a ``Config`` attribute.
        self.attributes: list[tuple[str, str, Callable[[Any], Any] | None]] = []
        seen: dict[str, str] = {}
        for row in self.settings:
            if row.name in self.by_name:
                raise ConfigurationError(f"setting {row.name!r} is declared twice")
            self.by_name[row.name] = row
            self.defaults[row.name] = row.default
            attribute = row.attribute_name
            if attribute:
                if attribute in RESERVED:
                    raise ConfigurationError(f"setting {row.name!r} would replace Config.{attribute}")
                if attribute in seen:
                    raise ConfigurationError(f"settings {seen[attribute]!r} and {row.name!r} both fill "
                                             f"Config.{attribute}")
                seen[attribute] = row.name
                self.attributes.append((attribute, row.name, row.parse))


def feature_modules() -> list[str]:
    """The settings modules of the built-in features that have one, in name order
    (so the docs table does not move when the feature list is reordered)."""
    from ..features import BUILTIN

    package = resources.files("wurk_django")
    # Looking for the file first keeps a feature without settings from being imported.
    return [f"wurk_django.{name}.settings" for name in sorted(BUILTIN)
            if package.joinpath(name, "settings.py").is_file()]


def collect() -> Table:
    """Import every module that owns rows and build the table from their ``ROWS``."""
    rows: list[Setting] = []
    for name in (*ENGINE_MODULES, *feature_modules()):
        rows.extend(importlib.import_module(name).ROWS)
    return Table(rows)


_current: Table | None = None


def current() -> Table:
    """The table of this process, collected once."""
    global _current
    table = _current
    if table is None:
        table = _current = collect()
    return table
