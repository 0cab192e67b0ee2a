"""Every thread the package starts is a daemon thread (server/threads.py)."""

from __future__ import annotations

import ast
import threading

from tests.support import PACKAGE
from wurk_django.server.threads import spawn


def _thread_calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)
            and ast.unparse(node.func) in ("threading.Thread", "Thread")]


def test_every_thread_the_package_starts_is_a_daemon():
    """RUN-802: CPython joins non-daemon threads before ``atexit`` runs, so one stuck job on a
    non-daemon thread would keep the drain from starting: every ``threading.Thread(...)`` in
    the package says ``daemon=True`` (read from the source, so a new one is covered),
    ``spawn`` starts daemon threads, and no join is made without a bound."""
    found, not_daemon, unbounded = 0, [], []
    for path in PACKAGE.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for call in _thread_calls(tree):
            found += 1
            daemon = [k.value for k in call.keywords if k.arg == "daemon"]
            if not (daemon and isinstance(daemon[0], ast.Constant) and daemon[0].value is True):
                not_daemon.append(f"{path.relative_to(PACKAGE)}:{call.lineno}")
        # Bounded joins: a join given nothing waits for ever (a string's join always takes one).
        unbounded += [f"{path.relative_to(PACKAGE)}:{node.lineno}" for node in ast.walk(tree)
                      if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                      and node.func.attr == "join" and not node.args and not node.keywords]
    assert found >= 5 and not_daemon == [] and unbounded == []
    done = threading.Event()
    thread = spawn("test-daemon", done.set)
    assert thread.daemon and done.wait(10)


def test_the_scan_sees_a_thread_without_daemon():
    [call] = _thread_calls(ast.parse("t = threading.Thread(target=f, name='x')"))
    assert not [k for k in call.keywords if k.arg == "daemon"]
