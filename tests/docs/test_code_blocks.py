"""Every code block of README.md and docs/ runs here, or is marked a fragment on purpose
(issue 29 item 4): an example that drifts from the code fails the suite.

The python blocks of a page run in order in one module namespace, as a reader would
paste them, against the test Redis; whatever they pushed is then worked off by a real
worker (the in-process launcher of ``manage.py wurk --burst``), and no job may end in
the retry or dead set. The page's prelude (``preludes.py``) stands in for the
reader's own project (models, helpers); wurk_django's names must be imported by the
page itself. Directives are described in ``blocks.py``.
"""

from __future__ import annotations

import ast
import importlib
import json
import re
import sys
import types

import pytest

from . import preludes
from .blocks import KINDS, ROOT, Block, all_blocks

BLOCKS = all_blocks()


def _settings_names(code: str) -> set[str]:
    tree = ast.parse(code)
    return {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets
            if isinstance(t, ast.Name) and t.id.isupper()}


def _is_settings(code: str) -> bool:
    """Only assignments to UPPERCASE names (a settings.py excerpt)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return False
    return bool(tree.body) and all(
        isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.isupper() for t in node.targets)
        for node in tree.body)


def kind_of(block) -> str:
    if block.kind:
        return block.kind
    if block.lang == "python":
        return "settings" if _is_settings(block.code) else "run"
    if block.lang == "json":
        return "json"
    return "unmarked"


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_every_block_is_run_or_marked_on_purpose(block):
    kind = kind_of(block)
    assert kind != "unmarked", (f"{block.where}: a ```{block.lang} block needs a directive above it, e.g. "
                                "<!-- doc-test: fragment: <why it cannot run> -->")
    assert kind in (*KINDS, "json"), f"{block.where}: unknown doc-test kind {kind!r}"
    if kind == "fragment":
        assert block.reason, f"{block.where}: a fragment says why it is not run"
    if kind == "file":
        assert block.reason, f"{block.where}: a file block names the file it shows"
    if kind in ("run", "settings"):
        compile(block.code, block.where, "exec")  # at least valid Python, whatever else runs it
    if kind == "json":
        json.loads(block.code)


FILES = [b for b in BLOCKS if b.kind == "file"]


@pytest.mark.parametrize("block", FILES, ids=[b.where for b in FILES])
def test_file_blocks_equal_their_file(block):
    path, text = block.shown_file()
    assert path.is_file(), f"{block.where}: {block.file} does not exist"
    assert block.code == text, (f"{block.where} differs from {block.file}: copy the file into the page "
                                "(the file is what the tests check)")


def test_a_file_block_that_drifted_fails():
    drifted = Block("docs/deployment.md", 1, "ini", "[Unit]\nDescription=an older unit", "file",
                    "docs/deploy/wurk.service lines 4-5")
    path, text = drifted.shown_file()
    assert path == ROOT / "docs" / "deploy" / "wurk.service"
    assert text.splitlines()[0] == "[Unit]" and text != drifted.code


def _check_wurk(where: str, namespace: dict) -> None:
    from wurk_django.conf import problems

    wurk = namespace.get("WURK")
    if wurk is not None:
        assert isinstance(wurk, dict), f"{where}: WURK is a dict"
        found = [str(p) for p in problems(wurk)]
        assert found == [], f"{where}: WURK fails the settings checks: {found}"


SETTINGS = [b for b in BLOCKS if kind_of(b) == "settings"]


@pytest.mark.parametrize("block", SETTINGS, ids=[b.where for b in SETTINGS])
def test_settings_blocks_pass_the_checks(block):
    if _requirement_missing(block):
        pytest.skip(f"{block.where} needs {_requirement_missing(block)}")
    namespace = preludes.settings_namespace(block.page)
    exec(compile(block.code, block.where, "exec"), namespace)
    assert _settings_names(block.code), f"{block.where}: a settings block defines settings"
    _check_wurk(block.where, namespace)


#: Where a page's WURK points at Redis: the test keeps its own database.
REDIS_KEYS = ("REDIS_URL", "REDIS", "SHARDS", "QUEUE_SHARDS")

RUN_PAGES = sorted({b.page for b in BLOCKS if kind_of(b) == "run"})


_HEADER = re.compile(r"^#\s*([\w/]+)\.py\b")


def _module_name(block) -> str | None:
    """``# shop/jobs.py`` on a block's first line: the module the reader puts it in."""
    match = _HEADER.match(block.code.lstrip().splitlines()[0]) if block.code.strip() else None
    return match.group(1).replace("/", ".") if match else None


def _flags(block) -> list[str]:
    """What follows ``run:`` or ``settings:``, comma-separated: ``requires <module>``
    (skipped where it cannot be imported, e.g. django.tasks on Django 5.2) and
    ``after the worker`` (the worker drains what was pushed before the block runs)."""
    if block.kind in ("run", "settings") and block.reason:
        return [flag.strip() for flag in block.reason.split(",")]
    return []


def _requirement_missing(block) -> str | None:
    for flag in _flags(block):
        if flag.startswith("requires "):
            name = flag.removeprefix("requires ").strip()
            try:
                importlib.import_module(name)
            except ImportError:
                return name
    return None


def _drain(page: str, redis_db) -> None:
    """Run a real worker (the in-process launcher of ``wurk --burst``) until the queues
    the page pushed to are empty."""
    from wurk_django.conf import Config
    from wurk_django.server.burst import run_burst

    for _ in range(5):  # again while jobs pushed new queues (a batch's callback queue)
        queues = sorted(q.decode() for q in redis_db.smembers("queues") if q.decode() not in preludes.UNSERVED)
        if not any(redis_db.llen(f"queue:{q}") for q in queues):
            return
        assert run_burst(Config(queues=queues), timeout=30), f"{page}: the worker did not empty {queues}"
    raise AssertionError(f"{page}: jobs kept arriving in new queues")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("page", RUN_PAGES)
def test_page_runs_in_order(page, redis_db, monkeypatch, settings):
    from wurk_django import features, registry

    # The features' own jobs (a batch's callback runner) stay registered; the page's go.
    features.install()
    monkeypatch.setattr(registry, "_jobs", dict(registry._jobs))
    try:
        _run_page(page, redis_db, monkeypatch, settings)
    finally:
        preludes.teardown(page)


def _apply_redis_settings(block, settings) -> None:
    names = _settings_names(block.code) & {"CACHES", "REDIS_URL"}
    if not names:
        return
    namespace = preludes.settings_namespace(block.page)
    exec(compile(block.code, block.where, "exec"), namespace)
    test_url = settings.WURK_TEST_REDIS_URL
    if "REDIS_URL" in names:
        settings.REDIS_URL = test_url
    if "CACHES" in names:
        caches = {}
        for alias, params in namespace["CACHES"].items():
            params = dict(params)
            if "redis" in str(params.get("BACKEND", "")).lower():
                params["LOCATION"] = test_url
            caches[alias] = params
        settings.CACHES = caches


def _run_page(page, redis_db, monkeypatch, settings) -> None:
    from wurk_django.api import DeadSet, RetrySet

    module = types.ModuleType("tests.docs.page")
    namespace = module.__dict__

    def setitem(name, value):
        monkeypatch.setitem(sys.modules, name, value)

    preludes.prepare(page, namespace, setitem)
    # Where the pages' settings say the reader's code lives; the page's namespace stands in.
    for name in ("tests.docs.page", "myapp.middleware", "myapp.monitoring", "app.metrics"):
        preludes.alias_module(name, module, setitem)
    base = dict(settings.WURK)
    applied = None
    for block in (b for b in BLOCKS if b.page == page and kind_of(b) in ("run", "settings")):
        if kind_of(block) == "settings" and not _settings_names(block.code) & {"WURK", "TASKS"}:
            # Django's own settings (LOGGING...): checked alone above. A Redis cache and a
            # REDIS_URL apply to the blocks after it, on the test's own Redis.
            _apply_redis_settings(block, settings)
            continue
        if _requirement_missing(block):
            continue  # e.g. django.tasks on Django 5.2: the rest of the page still runs
        if "after the worker" in _flags(block):
            _drain(page, redis_db)
        target = _module_name(block)
        if target:
            # Classes defined there are named as the reader's would be (shop.jobs.SendReceipt),
            # and its relative imports (from .models import Upload) find the page.
            package = target.rpartition(".")[0]
            namespace.update(__name__=target, __package__=package)
            for name in (target, f"{package}.models", f"{package}.limits", f"{package}.erp"):
                preludes.alias_module(name, module, setitem)
        try:
            exec(compile(block.code, block.where, "exec"), namespace)
        except Exception as exc:
            raise AssertionError(f"{block.where} raised {type(exc).__name__}: {exc}") from exc
        _check_wurk(block.where, namespace)
        if namespace.get("WURK") is not applied:
            # The page's settings apply to the blocks after it, on the test's own Redis.
            applied = namespace["WURK"]
            settings.WURK = {**base, **{k: v for k, v in applied.items() if k not in REDIS_KEYS}}
        if "TASKS" in _settings_names(block.code):
            settings.TASKS = namespace["TASKS"]
    preludes.finish(page, namespace)
    retries, dead = RetrySet().size, DeadSet().size
    _drain(page, redis_db)
    assert RetrySet().size == retries, f"{page}: a job failed: {[e.item.get('error_message') for e in RetrySet()]}"
    assert DeadSet().size == dead, f"{page}: a job died: {[e.item.get('error_message') for e in DeadSet()]}"
    preludes.verify(page, namespace, redis_db)
