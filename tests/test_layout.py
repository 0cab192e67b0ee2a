"""The package's import structure (issue 11 item 5): no import circle among module-level
imports inside wurk_django/, the engine never reaches the data API, and the import paths
users write keep working.

Imports are read with ``ast`` from the source (function-level ones included), so a
circle cannot hide from this test by being imported lazily somewhere else first.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support import PACKAGE


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    line: int
    lazy: bool  # inside a function: runs at call time, not at import
    type_only: bool  # under ``if TYPE_CHECKING``: never runs


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts.pop()
        found[".".join(parts)] = (path, is_package)
    return found


MODULES = _modules()


def _edges(module: str) -> list[Edge]:
    path, is_package = MODULES[module]
    here = module.split(".") if is_package else module.split(".")[:-1]
    edges: list[Edge] = []

    def add(target: str, node: ast.stmt, lazy: bool, type_only: bool) -> None:
        if target in MODULES and target != module:
            edges.append(Edge(module, target, node.lineno, lazy, type_only))

    def visit(node: ast.AST, lazy: bool, type_only: bool) -> None:
        for child in ast.iter_child_nodes(node):
            child_lazy = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            child_type_only = type_only or (isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test))
            if isinstance(child, ast.ImportFrom):
                base = here[:len(here) - child.level + 1] if child.level else []
                target = ".".join(base + ([child.module] if child.module else []))
                for alias in child.names:
                    submodule = f"{target}.{alias.name}"
                    add(submodule if submodule in MODULES else target, child, lazy, type_only)
            elif isinstance(child, ast.Import):
                for alias in child.names:
                    add(alias.name, child, lazy, type_only)
            visit(child, child_lazy, child_type_only)

    visit(ast.parse(path.read_text()), False, False)
    return edges


EDGES = {module: _edges(module) for module in MODULES}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_the_scanner_sees_imports():
    """A test that cannot fail is a defect: the scanner must see known edges of each kind."""
    job = {(e.target, e.lazy) for e in EDGES["wurk_django.job"]}
    assert ("wurk_django.payload", False) in job
    assert ("wurk_django.client.push", True) in job
    assert any(e.type_only for e in EDGES["wurk_django.registry"])
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circle_among_module_level_imports():
    graph = {m: {e.target for e in EDGES[m] if not e.lazy and not e.type_only} for m in MODULES}
    assert _cycles(graph) == []


def test_the_engine_never_imports_the_data_api():
    """Nothing the worker runs (wurk_django.server and everything it imports, at any depth,
    module-level or lazily) imports wurk_django.api: the engine owns the Redis layout and
    the data API reads it, never the other way round."""
    reached: dict[str, str] = {}
    todo = [m for m in MODULES if m == "wurk_django.server" or m.startswith("wurk_django.server.")]
    for module in todo:
        reached[module] = module
    while todo:
        module = todo.pop()
        for edge in EDGES[module]:
            if edge.type_only or edge.target in reached:
                continue
            reached[edge.target] = f"{reached[module]} -> {edge.target}" if reached[module] != module else \
                f"{module}:{edge.line} -> {edge.target}"
            todo.append(edge.target)
    into_api = sorted(path for target, path in reached.items()
                      if target == "wurk_django.api" or target.startswith("wurk_django.api."))
    assert into_api == []


@pytest.mark.parametrize("path, names", [
    ("wurk_django", ["Job", "job", "Setter"]),
    ("wurk_django.api", ["Queue", "DeadSet", "RetrySet", "ScheduledSet", "ProcessSet", "Stats", "WorkSet"]),
    ("wurk_django.testing", ["fake", "inline", "execute"]),
    ("wurk_django.gunicorn", ["post_fork", "post_worker_init", "pre_fork", "worker_abort", "worker_exit",
                              "worker_int"]),
    ("wurk_django.asgi", ["wrap"]),
    ("wurk_django.tasks", ["WurkBackend", "TaskJob"]),
])
def test_public_import_paths_keep_working(path, names):
    module = importlib.import_module(path)
    if path == "wurk_django.tasks" and not module.AVAILABLE:
        pytest.skip("neither django.tasks (Django 6+) nor the django-tasks backport")
    assert [name for name in names if not hasattr(module, name)] == []


def _push_side_roots() -> list[str]:
    """What a process that only pushes imports: the package, the client, the data API
    (revoke included), the death path a kill or revoke takes, and every feature's
    package, ``install`` module and client part (the list of features is the package's
    own, so a new feature is covered the day it is added)."""
    from wurk_django import features

    roots = ["wurk_django", "wurk_django.client", "wurk_django.api", "wurk_django.death", "wurk_django.revocation"]
    roots += [m for m in MODULES if m.startswith(("wurk_django.client.", "wurk_django.api."))]
    for name in features.BUILTIN:
        roots += [m for m in (f"wurk_django.{name}", f"wurk_django.{name}.install", f"wurk_django.{name}.client")
                  if m in MODULES]
    roots += [m for m in ("wurk_django.celery", "wurk_django.tasks") if m in MODULES]
    return roots


def test_the_push_side_imports_no_engine_module():
    """Issue 41 item 6: at import time (module-level imports, at any depth) nothing a
    pushing process loads reaches ``wurk_django.server``; the engine is reached only from
    a function that runs in a worker (an ``install_server()``, a server middleware).
    tests/test_features.py holds the same at run time, through every public push API."""
    reached: dict[str, str] = {}
    todo = _push_side_roots()
    for module in todo:
        reached[module] = module
    while todo:
        module = todo.pop()
        for edge in EDGES[module]:
            if edge.lazy or edge.type_only or edge.target in reached:
                continue
            reached[edge.target] = f"{reached[module]} -> {edge.target}"
            todo.append(edge.target)
    assert "wurk_django.batch.install" in reached and "wurk_django.api.revoke" in reached
    engine = sorted(path for target, path in reached.items()
                    if target == "wurk_django.server" or target.startswith("wurk_django.server."))
    assert engine == []


def test_stopping_sees_the_run_and_the_manager_never_the_processor():
    """Issue 41 item 1: the watchdog, revocations and the async raise (server/stopping/)
    reach a job through its run and its manager; no module there imports the processor
    (lazily or for typing) or names ``Processor`` or its private ``_failed``, so a stop
    cannot become a second way to settle a run."""
    stopping = [m for m in MODULES if m.startswith("wurk_django.server.stopping.")]
    assert "wurk_django.server.stopping.watchdog" in stopping
    imports = [(e.source, e.line) for m in stopping for e in EDGES[m]
               if e.target == "wurk_django.server.run.processor"]
    assert imports == []
    named = []
    for module in stopping:
        for node in ast.walk(ast.parse(MODULES[module][0].read_text())):
            name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
            if name in ("Processor", "_failed"):
                named.append((module, node.lineno, name))
    assert named == []
