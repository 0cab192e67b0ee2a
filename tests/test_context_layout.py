"""One ambient rule for "which Redis, which config" (issue 41 item 3; issue 24 item 1).

Every call that needs a config or a Redis and was not handed one asks
:func:`wurk_django.context.config` / :func:`wurk_django.context.redis`: the explicit
argument, else the enclosing ``via()`` block's shard, else the running job's config
(a worker started with ``--shard eu`` keeps its jobs' pushes and reads on ``eu``),
else the settings. Calling ``get_config()`` or a bare ``get_redis()`` instead is a
second rule (the settings', whatever job is running) and the bug this test exists
for: on a ``--shard`` worker, a batch opened by a job and the pushes of its children
would go to two different servers.

The test is a deny list over the whole package, not an allow list of modules: a
new module, feature or area is covered the day it is added. Only the modules that
own the rule may name the settings' config themselves (``OWNERS``); anywhere else,
``get_redis()`` / ``async_redis()`` must be given the config (``config=...``) the
caller already chose. The test reads the source with ``ast``, so lazy
(function-level) imports and calls are seen too.
"""

from __future__ import annotations

import ast

import pytest

from tests.support import PACKAGE

#: The settings' config, by name: what only the rule's owners may reach for.
SETTINGS = {"get_config", "base_config"}
#: Redis factories that fall back on an ambient config when called without one.
FACTORIES = {"get_redis", "async_redis"}

OWNERS = {
    # The settings' config: built and cached here; get_config() is the public door to the rule.
    "conf/config.py": SETTINGS,
    "conf/__init__.py": SETTINGS,
    # The rule itself.
    "context.py": SETTINGS | FACTORIES,
    # The Redis layer's factory: its constructors default to the rule.
    "redis/connection.py": FACTORIES,
    # Modules whose subject is the settings themselves (never a job's or a shard's config).
    "redis/shards.py": {"base_config"},  # via() and names(): the shards the settings list
    "checks.py": {"base_config"},  # Django's system checks check the settings
    "admin/shard_select.py": {"base_config"},  # the dashboard's selector lists the settings' shards
}


def _findings(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of every use of a settings name (imported, called or passed
    around) and of every factory call without an explicit ``config``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name in SETTINGS]
        elif isinstance(node, ast.Name) and node.id in SETTINGS:
            found.append((node.lineno, node.id))
        elif isinstance(node, ast.Attribute) and node.attr in SETTINGS:
            found.append((node.lineno, node.attr))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in FACTORIES:
                given = [k.value for k in node.keywords if k.arg == "config"]
                explicit = given and not (isinstance(given[0], ast.Constant) and given[0].value is None)
                if not explicit and not (name == "async_redis" and node.args):
                    found.append((node.lineno, name))
    return sorted(set(found))


MODULES = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py"))


def test_the_scanner_sees_every_way_round():
    source = ("from ..conf import get_config\n"
              "def f():\n"
              "    return conf.base_config(), get_redis(), conn.get_redis('fetch', config=None)\n"
              "def g(config):\n"
              "    return get_redis(config=config), async_redis(config), default(factory=get_config)\n")
    assert _findings(source) == [(1, "get_config"), (3, "base_config"), (3, "get_redis"), (5, "get_config")]


def test_the_owners_exist():
    assert [module for module in OWNERS if not (PACKAGE / module).exists()] == []


def test_the_scan_covers_every_area():
    # The list is the package itself: every feature folder and the engine's rooms are in it.
    areas = {module.split("/")[0] for module in MODULES if "/" in module}
    assert {"server", "client", "batch", "workflow", "celery", "tasks", "api", "admin", "redis"} <= areas


@pytest.mark.parametrize("module", MODULES)
def test_no_module_but_the_owners_chooses_a_config_or_redis_itself(module):
    allowed = OWNERS.get(module, set())
    found = [(line, name) for line, name in _findings((PACKAGE / module).read_text()) if name not in allowed]
    assert found == [], (f"{module} picks the settings' config or Redis itself; use wurk_django.context.config() "
                         "/ context.redis() (explicit argument > via() > the running job's > the settings'), "
                         "or pass the config the caller chose: get_redis(config=...)")
