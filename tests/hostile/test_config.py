"""Issue 12, item 11: a bad Redis URL fails ``manage.py check`` and the worker, with one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support import ROOT
from wurk_django.conf import problems, redis_url_problem

BAD = ["redsi://localhost:6379/0", "redis://localhost:6379/abc", "redis://localhost:notaport/0",
       "redis://localhost:6379/0?db=x", "http://localhost:6379/0"]
GOOD = ["redis://localhost:6379/0", "rediss://user:pw@host:6380/3", "redis://localhost", "redis://h:1/",
        "unix:///tmp/redis.sock?db=2", "redis://localhost:6379?db=4"]


@pytest.mark.parametrize("url", BAD)
def test_bad_urls_are_problems(url):
    assert redis_url_problem(url)
    assert [p.key for p in problems({"REDIS_URL": url})] == ["REDIS_URL"]
    assert [p.key for p in problems({"REDIS": url})] == ["REDIS"]
    assert [p.key for p in problems({"REDIS": {"URL": url}})] == ["REDIS"]


@pytest.mark.parametrize("url", GOOD)
def test_good_urls_pass(url):
    assert redis_url_problem(url) is None
    assert problems({"REDIS_URL": url}) == []


def _run(*args: str, url: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "WURK_TEST_EXTRA": json.dumps({"REDIS_URL": url})}
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], cwd=str(ROOT), env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.slow
@pytest.mark.parametrize("url", ["redsi://localhost:6379/0", "redis://localhost:6379/abc"])
def test_check_and_worker_fail_with_one_line(url):
    check = _run("check", url=url)
    assert check.returncode != 0
    assert "REDIS_URL" in check.stderr and "Traceback" not in check.stderr
    worker = _run("wurk", "-c", "1", url=url)
    assert worker.returncode == 1
    lines = [line for line in worker.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("wurk: WURK['REDIS_URL']"), worker.stderr
