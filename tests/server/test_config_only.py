"""Worker components run from an explicit Config, and pools sized from it (issue 11, item 2).

The issue's numbers: ``python manage.py wurk -c 50`` with the default settings
got a main pool of 10 connections (sized from the settings' CONCURRENCY of 5),
and a ``Scheduler(Config(raw=...))`` could not run without Django settings.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from tests.support import ROOT

pytestmark = pytest.mark.slow


def _run(args: list[str], env: dict[str, str]) -> dict:
    proc = subprocess.Popen([sys.executable, *args], cwd=str(ROOT), env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    assert proc.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


def test_launcher_components_run_from_a_config_without_django_settings(redis_db):
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    env["PYTHONPATH"] = str(ROOT)
    seen = _run([str(ROOT / "tests" / "server" / "config_only_worker.py"), settings.WURK_TEST_REDIS_URL], env)
    assert seen["settings_reads"] == [], "\n".join(seen["settings_reads"])
    assert seen["settings_configured"] is False
    # Manager + fetcher + processors ran a job; the scheduler promoted one; the retry was
    # booked, promoted and died through the death path; heartbeat and reaper ran.
    assert seen["done_now"] == "now"
    assert seen["promoted"] == 1 and seen["done_scheduled"] == "scheduled"
    assert seen["retried"] == 1 and seen["died"] is True and seen["dead"] == 1
    assert seen["registered"] is True and seen["swept"] == 0
    assert seen["stopped"] is True and seen["deregistered"] is True


POOLS_SCRIPT = r"""
import json, os, sys
import django
django.setup()
from django.core.management import call_command
from wurk_django.redis import connection
from wurk_django.management.commands import wurk as command

# A settings-sized pool exists first (CONCURRENCY 5 -> 10), as any earlier client call makes.
connection.get_redis()

def report(launcher):
    launcher.manager.redis()
    launcher.manager.fetcher._mine().connection()
    launcher.manager.fetcher._done.set()  # no blocking wait: only the pool lookup below
    from wurk_django.redis.connection import get_redis
    blocking = get_redis("fetch", block_seconds=launcher.manager.fetcher.poll_interval, config=launcher.config)
    pid = os.getpid()
    sizes = {purpose: client.connection_pool.max_connections
             for (owner, purpose, _url), client in connection._clients.items() if owner == pid}
    sizes["manager"] = launcher.manager.redis().connection_pool.max_connections
    sizes["blocking"] = blocking.connection_pool.max_connections
    sizes["ack"] = launcher.manager.fetcher._mine().pool.max_connections
    print(json.dumps(sizes))
    sys.stdout.flush()
    os._exit(0)

command.Launcher.run = report
call_command("wurk", "-c", "50")
"""


def test_concurrency_flag_sizes_the_pools():
    # Issue 11: `-c 50` with default settings got a main pool of 10; now 50 + the fixed extras.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "PYTHONPATH": str(ROOT)}
    assert settings.WURK["CONCURRENCY"] == 5
    sizes = _run(["-c", POOLS_SCRIPT], env)
    assert sizes["manager"] >= 55 and sizes["main"] >= 55
    assert sizes["ack"] >= 52
    assert sizes["blocking"] >= 52
