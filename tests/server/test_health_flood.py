"""The health port cannot be starved (issue 43 item 5; RUN-110): a real worker started with
``--health-port`` answers every probe while 100 idle sockets keep reopening, and a client
sending one byte a second is cut off.

Before the fix, 16 idle sockets reopened every 4.8 s held every slot of the port (each was
kept for its 5 s read timeout, and a connection over the cap was closed at accept), so 20
of 20 ``/live`` probes failed and Kubernetes would restart the pod.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.error
import urllib.request

import pytest

from tests.local_redis import free_port
from tests.support import wait_for

pytestmark = pytest.mark.slow

IDLE = 100
REOPEN_EVERY = 4.8  # seconds: the cadence of the report, just under the old 5 s read timeout
PROBE_EVERY = 0.5
PROBE_FOR = 10.0


def _probe(port: int, path: str) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=1) as response:
            json.loads(response.read())
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, OSError):
        return 0  # refused, reset or timed out: what a kubelet counts as a failed probe


class IdleFlood:
    """``IDLE`` sockets that connect and send nothing, each closed and opened again every
    ``REOPEN_EVERY`` seconds (staggered), on a thread of their own."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.stop = threading.Event()
        self.opened = 0
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _connect(self) -> socket.socket | None:
        try:
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=1)
        except OSError:
            return None
        self.opened += 1
        return sock

    def _run(self) -> None:
        start = time.monotonic()
        slots: list[tuple[float, socket.socket | None]] = [
            (start + REOPEN_EVERY * i / IDLE, self._connect()) for i in range(IDLE)]
        while not self.stop.is_set():
            now = time.monotonic()
            for i, (due, sock) in enumerate(slots):
                if now >= due:
                    if sock is not None:
                        sock.close()
                    slots[i] = (due + REOPEN_EVERY, self._connect())
            self.stop.wait(0.02)
        for _, sock in slots:
            if sock is not None:
                sock.close()

    def __enter__(self) -> IdleFlood:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join(10)


@pytest.fixture
def health_worker(redis_db, worker_factory):
    port = free_port()
    worker = worker_factory("-c", "2", "--health-port", str(port))
    wait_for(lambda: _probe(port, "/ready") == 200, timeout=30, message="the worker's /ready")
    return worker, port


def test_probes_pass_while_a_hundred_idle_sockets_keep_reopening(health_worker):
    worker, port = health_worker
    results: list[tuple[str, int]] = []
    with IdleFlood(port) as flood:
        wait_for(lambda: flood.opened >= IDLE, message="the idle sockets to open")
        end = time.monotonic() + PROBE_FOR
        while time.monotonic() < end:
            for path in ("/live", "/ready"):
                results.append((path, _probe(port, path)))
            time.sleep(PROBE_EVERY)
        reopened = flood.opened
    failed = [r for r in results if r[1] != 200]
    assert len(results) >= 2 * int(PROBE_FOR / (PROBE_EVERY + 1)), results
    assert not failed, f"{len(failed)} of {len(results)} probes failed: {failed[:10]}"
    assert reopened > IDLE * 2  # the flood really kept reopening through the probes
    assert worker.alive()


def test_a_client_sending_a_byte_a_second_is_cut_off(health_worker):
    _worker, port = health_worker
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    request = b"GET /live HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 30
    sent = 0
    try:
        for byte in request:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                break
            sent += 1
            sock.settimeout(1.0)  # one byte a second, watching for the server's close meanwhile
            try:
                if sock.recv(1024) == b"":
                    break
            except TimeoutError:
                continue
            except OSError:
                break
    finally:
        sock.close()
    # The request must arrive whole within 2 s of the connect: a few bytes, never 30 s of them.
    assert sent < 10, f"still connected after {sent} bytes at one a second"
    assert _probe(port, "/live") == 200
