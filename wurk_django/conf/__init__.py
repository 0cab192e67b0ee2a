"""``settings.WURK``: defaults, validation, and the frozen config a worker runs with.

The setting is one dict, read lazily so ``override_settings(WURK=...)`` takes
effect at once (DJ-001). Keys are upper case, as Django settings are. Unknown
keys and wrong types are reported by :func:`problems` (used by the ``wurk``
command at boot and by Django's system checks) instead of being ignored.

The package, one concept per module:

* :mod:`.setting`: the :class:`Setting` row type;
* :mod:`.validators`: the checks rows are built from, and the queue-spec rule;
* :mod:`.core`: the engine's rows; a feature's rows are in ``wurk_django/<feature>/settings.py``;
* :mod:`.table`: collects the rows (``SETTINGS``, ``DEFAULTS``);
* :mod:`.targets`: which Redis (the fallback URL, bad servers and shards);
* :mod:`.capsules`: the ``CAPSULES`` setting (thread pools beside the default one);
* :mod:`.validation`: :func:`problems`;
* :mod:`.config`: :class:`Config`, built from the rows, and :func:`get_config`;
* :mod:`.docs`: the tables of docs/configuration.md.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigurationError
from ..redis.targets import REDIS_KEYS, RedisTarget, cache_redis_params, dict_problems, resolve
from .config import VIA, Config, base_config, get_config, reset_config
from .core import MODES, TESTING_MODES, default_tag
from .docs import MARKDOWN_BEGIN, MARKDOWN_END, markdown
from .setting import (
    ADMIN,
    CLIENT,
    FEATURES,
    LIMITERS,
    LOGGING,
    REDIS,
    RETRIES,
    SECTIONS,
    SWARM,
    WORKER,
    Setting,
)
from .table import current
from .targets import redis_url
from .validation import Problem, problems, raw_settings
from .validators import (
    QUEUE_NAME,
    QUEUE_NAME_RULE,
    REDIS_SCHEMES,
    is_queue_name,
    parse_queue,
    redis_url_problem,
)

__all__ = [
    "ADMIN", "CLIENT", "FEATURES", "LIMITERS", "LOGGING", "MARKDOWN_BEGIN", "MARKDOWN_END", "MODES",
    "QUEUE_NAME", "QUEUE_NAME_RULE", "REDIS", "REDIS_KEYS", "REDIS_SCHEMES", "RETRIES", "SECTIONS", "SWARM", "TESTING_MODES",
    "VIA", "WORKER", "Config", "ConfigurationError", "Problem", "RedisTarget", "Setting", "base_config",
    "cache_redis_params", "default_tag", "dict_problems", "get_config", "is_queue_name", "markdown",
    "parse_queue", "problems", "raw_settings", "redis_url", "redis_url_problem", "reset_config", "resolve",
]

# Names this module had before a feature's settings moved to the feature: looked up there on use.
_MOVED = {
    "LEADER_KEYS": ("wurk_django.leader.settings", "KEYS"),
    "periodic_problems": ("wurk_django.periodic.settings", "problems"),
}


def __getattr__(name: str) -> Any:
    # The table is collected on first use, not at import: features' packages import this one.
    if name == "SETTINGS":
        return current().settings
    if name == "DEFAULTS":
        return current().defaults
    if name == "_BY_NAME":
        return current().by_name
    if name in _MOVED:
        import importlib

        module, attribute = _MOVED[name]
        return getattr(importlib.import_module(module), attribute)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
