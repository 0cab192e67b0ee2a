"""Runs each user-guide example and keeps its outcome in a form both systems can be
compared on: the value it returned (tuples as lists, bytes as text), or the type name and
message of the exception it raised."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.support import ROOT, stop_process


def normal(value: Any) -> Any:
    """``value`` as plain JSON-like data, so results of the two systems compare equal."""
    if isinstance(value, (list, tuple)):
        return [normal(v) for v in value]
    if isinstance(value, dict):
        return {str(k): normal(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, range):
        return list(value)
    return value


def outcome(example) -> dict[str, Any]:
    """What ``example()`` gave: ``{"value": ...}`` or ``{"raised": type name, "message": ...}``."""
    started = time.monotonic()
    try:
        got: dict[str, Any] = {"value": normal(example())}
    except Exception as exc:  # every failure is an outcome to compare
        got = {"raised": type(exc).__name__, "message": str(exc)[:300]}
    got["seconds"] = round(time.monotonic() - started, 2)
    return got


def same(celery: dict[str, Any], wurk: dict[str, Any]) -> bool:
    """Celery's result: the same value, or an exception of the same type."""
    if "raised" in celery:
        return wurk.get("raised") == celery["raised"]
    return "value" in wurk and wurk["value"] == celery["value"]


class CeleryWorker:
    """``celery -A tests.celery_guide.celery_app worker`` as a child process (the prefork
    pool: Celery's time limits need it), on the test Redis; stopped by pid."""

    def __init__(self, queues: list[str]) -> None:
        self.log = tempfile.NamedTemporaryFile(prefix="celery-worker-", suffix=".log", delete=False)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "tests.celery_guide.celery_app", "worker", "-P", "prefork",
             "-c", "4", "-Q", ",".join(queues), "--without-gossip", "--without-mingle", "-l", "info",
             "-n", f"guide-{os.getpid()}@%h"],
            cwd=str(ROOT), env={**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=self.log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def output(self) -> str:
        return Path(self.log.name).read_text(errors="replace")

    def wait_ready(self, timeout: float = 60) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if "ready." in self.output():
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        raise RuntimeError(f"the Celery worker did not start:\n{self.output()[-3000:]}")

    def stop(self) -> None:
        stop_process(self.proc, signal.SIGTERM, 15)
