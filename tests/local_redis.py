"""Private redis-server processes for tests that need a server of their own shape
(a read-only replica, TLS, a Unix socket). Each is stopped by its pid.

Ports come from ``WURK_TEST_PORTS`` (``"7100-7199"`` by default), so parallel test
runs on one machine can be given ranges that do not collide.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.support import stop_process


def free_port() -> int:
    low, _, high = os.environ.get("WURK_TEST_PORTS", "7100-7199").partition("-")
    ports = list(range(int(low), int(high) + 1))
    random.shuffle(ports)
    for port in ports:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in WURK_TEST_PORTS {low}-{high}")


class LocalRedis:
    """``redis-server`` with the given arguments, in its own temporary directory."""

    def __init__(self, *args: str) -> None:
        if shutil.which("redis-server") is None:
            pytest.skip("redis-server is not installed")
        self.dir = Path(tempfile.mkdtemp(prefix="wurk-redis-"))
        self.args = args
        self.proc: subprocess.Popen | None = None

    def start(self, ready) -> LocalRedis:
        """Start it and wait until ``ready()`` is true (a ping over the right transport)."""
        self.proc = subprocess.Popen(
            ["redis-server", "--save", "", "--appendonly", "no", "--dir", str(self.dir),
             "--logfile", str(self.dir / "redis.log"), *self.args],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"redis-server exited at start: {self.log()}")
            try:
                if ready():
                    return self
            except Exception:
                pass
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"redis-server did not answer in 10 s: {self.log()}")
            time.sleep(0.05)

    def log(self) -> str:
        path = self.dir / "redis.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop(self) -> None:
        if self.proc is not None:
            stop_process(self.proc, signal.SIGTERM, 10)
        self.proc = None
        shutil.rmtree(self.dir, ignore_errors=True)
