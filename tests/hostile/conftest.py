"""Shared helpers for the hostile-input tests: run an in-process worker and read what it left."""

from __future__ import annotations

import json
import logging

import pytest


@pytest.fixture
def burst(caplog):
    """``burst(**wurk)`` drains the queues with an in-process worker; returns (emptied, worker log)."""
    from tests.support import wurk_settings
    from wurk_django.conf import Config
    from wurk_django.server.burst import run_burst

    def run(timeout: float = 20.0, **extra) -> tuple[bool, str]:
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="wurk_django"), wurk_settings(CONCURRENCY=2, **extra):
            emptied = run_burst(Config(), timeout=timeout)
        return emptied, caplog.text

    return run


def dead_entries(redis_db) -> list[dict]:
    return [json.loads(m) for m in redis_db.zrange("dead", 0, -1)]


def retry_entries(redis_db) -> list[dict]:
    return [json.loads(m) for m in redis_db.zrange("retry", 0, -1)]
