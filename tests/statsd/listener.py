"""A real UDP listener for statsd tests, stopped by the test that starts it."""

from __future__ import annotations

import socket
import threading
import time


class UDPListener:
    def __init__(self, port: int) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", port))
        self.sock.settimeout(0.1)
        self.port = port
        self.lines: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(65535)
            except TimeoutError:
                continue
            except OSError:
                return
            self.lines.extend(data.decode().splitlines())

    def matching(self, prefix: str) -> list[str]:
        return [line for line in list(self.lines) if line.startswith(prefix)]

    def wait_for(self, prefix: str, count: int = 1, timeout: float = 15.0) -> list[str]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.matching(prefix)
            if len(found) >= count:
                return found
            time.sleep(0.05)
        raise AssertionError(f"no {count} datagram(s) starting {prefix!r}; got {self.lines!r}")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(2)
        self.sock.close()
