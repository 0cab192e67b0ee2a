"""One row of the settings table: a key of ``settings.WURK``, what it accepts, its docs
and the typed ``Config`` attribute it becomes.

Rows are declared where the code that reads them lives: the engine's in
:mod:`wurk_django.conf.core`, a feature's in ``wurk_django/<feature>/settings.py``.
This module imports nothing of the package, so a feature's settings module stays
light (no Redis, no worker engine).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Headings of docs/configuration.md, in the order they are listed; a row may name
# another heading, listed after these.
REDIS = "Redis"
WORKER = "Worker"
RETRIES = "Retries and the dead set"
CLIENT = "Client"
LOGGING = "Logging"
ADMIN = "Admin dashboard"
SWARM = "Swarm"
FEATURES = "Features"
LIMITERS = "Rate limiters"
SECTIONS = (REDIS, WORKER, RETRIES, CLIENT, LOGGING, ADMIN, SWARM, FEATURES, LIMITERS)


@dataclass(frozen=True)
class Setting:
    """One key of ``settings.WURK``: its default, the check its value must pass (``want``
    says in words what that is, for error messages), one line of documentation, and the
    heading it is listed under in docs/configuration.md.

    ``Config`` gets one attribute per row (``attribute``, by default the key in lower
    case; ``""`` for none) holding ``parse(value)``, or the value itself when ``parse``
    is ``None``. ``type`` is what that attribute holds, usable with ``isinstance``.
    """

    name: str
    default: Any
    check: Callable[[Any], bool]
    want: str
    doc: str
    section: str = FEATURES
    #: A feature's own detailed check, as a dotted path to ``fn(value) -> [messages]``,
    #: used instead of the generic "is not <want>" message (imported only when the key
    #: is set, so the settings table never imports a feature). ``kind`` names the
    #: system check id the messages map to (see checks.py).
    detail: str | None = None
    kind: str = "value"
    attribute: str | None = None
    parse: Callable[[Any], Any] | None = None
    type: Any = object

    @property
    def attribute_name(self) -> str:
        """The ``Config`` attribute this row fills (``""``: none)."""
        return self.name.lower() if self.attribute is None else self.attribute
