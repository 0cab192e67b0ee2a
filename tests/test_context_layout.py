"""Worker-side feature code reads the job context, never the settings (issue 24 item 1).

A worker may run with its own config (``-q``, ``-c``, ``--shard``): whatever it does
for a job must use that config and the Redis the job was fetched from, which the
processor puts in :func:`wurk_django.context.current`. ``get_config()`` and
``get_redis()`` give the *settings'* config and its default Redis instead, so a
call to either in worker-side code is the bug this test exists for: on a worker
started with ``--shard``, the state would land on the wrong server.

The worker-side modules (``WORKER_SIDE``) are the ones whose code runs because a
worker is running a job or settling its outcome: the processor and its retry /
death / invalid-payload paths, and every feature module holding server
middleware, death handlers, batch acks and callbacks, unique-lock releases,
limiter reschedules, encryption burials, stored profiles, iterable and ``django.tasks``
jobs.
Some of them also hold client-side entry points (``Batch.jobs()``,
``unique.locked()``, ``Status``); those resolve through
:func:`wurk_django.context.config` / :func:`wurk_django.context.redis`, the one
place that falls back on the settings outside a job. The test reads the source
with ``ast``, so lazy (function-level) imports and calls are seen too.

Not listed: ``limiter/base.py`` builds the dedicated ``LIMITER_REDIS`` pool with
``get_redis("limiter", config=...)`` from an explicit config (the default path
there goes through the context); ``job.py`` pushes jobs for user code, which
routes by ``via()`` / shard options as any client does.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import PACKAGE

WORKER_SIDE = (
    "server/run/processor.py", "server/retry.py", "server/death.py", "server/invalid.py",
    "batch/middleware.py", "batch/deaths.py", "batch/callbacks.py", "batch/fire.py", "batch/batch.py",
    "batch/status.py", "unique/lock.py", "unique/middleware.py", "limiter/middleware.py",
    "encryption/middleware.py", "iterable.py", "expiry/__init__.py", "tasks/job.py", "profiling/middleware.py",
    "api/bulk.py",
)
FORBIDDEN = {"get_config", "get_redis"}


def _calls(path: Path) -> list[tuple[int, str]]:
    """``(line, name)`` of every call to a forbidden name, bare or as an attribute."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in FORBIDDEN:
                found.append((node.lineno, name))
    return found


def test_the_scanner_sees_calls(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from x import get_config\n    return get_config(), conn.get_redis(config=c)\n")
    assert _calls(sample) == [(3, "get_config"), (3, "get_redis")]


@pytest.mark.parametrize("module", WORKER_SIDE)
def test_worker_side_modules_use_the_job_context(module):
    path = PACKAGE / module
    assert path.exists(), f"{module} moved: update WORKER_SIDE"
    assert _calls(path) == [], (f"{module} resolves the settings' config or Redis; inside a worker use "
                                "wurk_django.context.current() (or context.config()/redis() for client entry points)")
