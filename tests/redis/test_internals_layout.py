"""The rule that keeps redis-py's insides in two files (issue 41 item 4).

wurk_django/redis/wire.py (a connection's socket and parser: the fast path) and
wurk_django/redis/pools.py (a pool's options, free queue and classes; a Sentinel
pool's primary) are the only modules that touch parts of redis-py it does not
promise. Each such reach there has a plain fallback, so a redis-py release that moves
one breaks those files only. And nothing in the package keeps state of its own on
another library's objects: wurk's per-connection state is a
:class:`~wurk_django.redis.wire.ConnectionState` kept beside the connection.

The scan reads every module of wurk_django/ (its syntax tree, not its text). The
tests at the end feed it one line of each kind it must catch, so it cannot pass by
seeing nothing.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import PACKAGE

#: The modules allowed to reach into redis-py's undocumented parts.
ADAPTERS = {PACKAGE / "redis" / "wire.py", PACKAGE / "redis" / "pools.py"}

#: Attributes of redis-py's connections, pools and parsers that it does not promise, by
#: name: whatever object they are read from (except ``self``/``cls``, a class's own).
REDIS_PY_PRIVATE = {
    # a connection's socket, reader and packer
    "_sock", "_parser", "_reader", "_buffer", "_command_packer", "_buffer_cutoff", "_connect",
    # a pool's bookkeeping
    "_available_connections", "_in_use_connections", "_created_connections", "_checkpid", "_fork_lock",
    "connection_kwargs", "make_connection", "connection_class",
    # a Sentinel pool's proxy
    "proxy", "master_address", "sentinel_manager", "is_master",
}
#: The names above that are also options of redis-py's constructors (``connection_class=``)
#: or of Django's (a model's ``proxy``): as a string, only the others count.
KEYWORDS = {"connection_class", "proxy", "is_master", "sentinel_manager"}
#: Names private to redis-py only when read off a pool or connection (``_lock`` is also the
#: name of many of wurk's own locks): flagged when the object's expression says pool or connection.
ON_POOLS = {"_lock", "pid", "pool"}


def _is_own(node: ast.expr) -> bool:
    return isinstance(node, ast.Name) and node.id in ("self", "cls")


def _source(node: ast.expr) -> str:
    return ast.unparse(node).lower()


def reaches(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, what)`` for every reach into redis-py's internals in ``tree``."""
    found = []
    for node in ast.walk(tree):
        hit = None
        if isinstance(node, ast.Attribute) and not _is_own(node.value):
            if node.attr in REDIS_PY_PRIVATE:
                hit = f".{node.attr}"
            elif node.attr in ON_POOLS and ("pool" in _source(node.value) or "conn" in _source(node.value)):
                hit = f"{ast.unparse(node)}"
            elif node.attr == "PyDLL":
                hit = "ctypes.PyDLL"
        elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Attribute) and t.attr == "__class__" and not _is_own(t.value)
                and ("pool" in _source(t.value) or "conn" in _source(t.value)) for t in node.targets):
            hit = "a pool's or connection's __class__ swapped"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) \
                and node.value in REDIS_PY_PRIVATE - KEYWORDS:
            hit = repr(node.value)  # getattr(pool, "connection_kwargs"), hasattr(conn, "_sock")
        elif isinstance(node, ast.Import):
            if any(alias.name.split(".")[0] == "hiredis" for alias in node.names):
                hit = "import hiredis"
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split(".")[0] == "hiredis" or node.module.startswith("redis._") \
                    or node.module == "redis.client" \
                    or (node.module.startswith("redis") and any(a.name.startswith("_") for a in node.names)):
                hit = f"from {node.module} import ..."
        if hit:
            found.append((node.lineno, hit))
    return found


def _writes_dict(node: ast.AST) -> bool:
    """``x.__dict__[k] = v``, ``x.__dict__.setdefault(...)`` and the like, on another object."""
    if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
        targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
        return any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Attribute)
                   and t.value.attr == "__dict__" and not _is_own(t.value.value) for t in targets)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        owner = node.func.value
        return (node.func.attr in ("setdefault", "pop", "update", "__setitem__", "clear", "popitem")
                and isinstance(owner, ast.Attribute) and owner.attr == "__dict__" and not _is_own(owner.value))
    return False


def foreign_state(tree: ast.AST) -> list[tuple[int, str]]:
    """``(line, what)`` for every place ``tree`` keeps state on an object not its own:
    a ``_wurk_*`` attribute (set, read or named), a write through another object's
    ``__dict__``."""
    found = []
    for node in ast.walk(tree):
        hit = None
        if isinstance(node, ast.Attribute) and node.attr.startswith("_wurk_"):
            hit = f".{node.attr}"
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("_wurk_"):
            hit = repr(node.value)
        elif _writes_dict(node):
            hit = "a write through another object's __dict__"
        if hit:
            found.append((node.lineno, hit))
    return found


def scan(package: Path) -> list[str]:
    """Every breach of the rule in ``package``'s modules, as ``path:line what``."""
    allowed = {adapter.relative_to(PACKAGE) for adapter in ADAPTERS}
    breaches = []
    for path in sorted(package.rglob("*.py")):
        tree = ast.parse(path.read_text())
        hits = foreign_state(tree)
        if path.relative_to(package) not in allowed:
            hits += reaches(tree)
        where = path.relative_to(package.parent)
        breaches += [f"{where}:{line} {what}" for line, what in sorted(hits)]
    return breaches


def test_only_the_adapters_reach_into_redis_py_and_nothing_keeps_state_on_its_objects():
    assert scan(PACKAGE) == []


def test_the_adapters_are_where_the_reaches_are():
    # The scan does see them where they are allowed (else it would prove nothing above).
    for adapter in ADAPTERS:
        assert reaches(ast.parse(adapter.read_text())), adapter


def test_adapters_keep_no_state_on_redis_py_objects_either():
    for adapter in ADAPTERS:
        assert foreign_state(ast.parse(adapter.read_text())) == [], adapter


# -- the scan catches each kind of breach ------------------------------------------------------

CAUGHT = [
    "conn._sock.sendall(b'')",
    "parse = conn._parser.parse_error",
    "db = client.connection_pool.connection_kwargs.get('db', 0)",
    "conn = pool.make_connection()",
    "pool.connection_class = Wrapped",
    "options = getattr(pool, 'connection_kwargs', {})",
    "pool._available_connections.clear()",
    "pool._checkpid()",
    "connection._lock = threading.Lock()",
    "free = pool.pool.get_nowait()",
    "each.proxy.master_address = primary",
    "from redis.client import Pipeline",
    "import hiredis",
    "pool.__class__ = Sharing",
]

KEPT_ON_OTHERS = [
    "conn._wurk_used = monotonic()",
    "conn.__dict__.pop('_other', None)",
    "cache = client.__dict__.setdefault('scripts', {})",
    "config.__dict__['memo'] = 1",
    "STATE = '_wurk_wake_demand'",
]


@pytest.mark.parametrize("line", CAUGHT)
def test_the_scan_catches_a_reach_into_redis_py(line):
    assert reaches(ast.parse(line)), line


@pytest.mark.parametrize("line", KEPT_ON_OTHERS)
def test_the_scan_catches_state_kept_on_another_object(line):
    assert foreign_state(ast.parse(line)), line


@pytest.mark.parametrize("line", ["self._lock = threading.Lock()", "self._reader = None",
                                  "with self._lock: pass", "cls.connection_class = Other",
                                  "self.__dict__['x'] = 1", "lock = threading.Lock()"])
def test_a_class_own_attributes_are_not_breaches(line):
    tree = ast.parse(line)
    assert reaches(tree) == [] and foreign_state(tree) == []
