"""HTTP health probes for container orchestrators (``manage.py wurk --health-port``).

``GET /live`` answers 200 while the worker process is running and fetching,
503 once it is quiet or stopping (a quiet process only ever stops).
``GET /ready`` answers 200 only while Redis answers a PING and the process is
fetching: not quiet, and a processor came back from a fetch within the last
30 seconds (or every processor is busy with a job). Anything else is 503 with
the reasons in a small JSON body. Both bodies carry the process identity
(host:pid:nonce); nothing else is exposed.

The listener binds ``WURK["HEALTH_BIND"]`` (127.0.0.1 unless set: a probe from
the same host or pod, never the whole network). It is built to be cheap to
leave open: a request must arrive whole within ``READ_TIMEOUT`` seconds (a
client sending a byte at a time is cut off too), at most ``MAX_CONNECTIONS``
are served at once and any more are closed at accept, so a flood of half-sent
requests costs a bounded number of threads. The Redis PING goes through the
same client factory as the rest of the worker (:func:`~wurk_django.connection.probe_redis`),
so it reaches Redis however it is configured: a URL, TLS, a Unix socket or
Sentinel. Swarm children share one port: the first child to bind it serves;
the others retry every 5 seconds, so the port outlives any one child.
"""

from __future__ import annotations

import errno
import io
import json
import logging
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import redis as redis_lib

from ..connection import probe_redis

logger = logging.getLogger("wurk_django.worker")

READY_WINDOW = 30.0  # seconds since a processor last came back from a fetch
RETRY_BIND = 5.0  # seconds between tries at a port another process holds
PING_TIMEOUT = 1.0  # a probe's own timeout is often 1 s
READ_TIMEOUT = 5.0  # seconds for a whole request to arrive; a probe sends one in microseconds
MAX_CONNECTIONS = 16  # requests served at once; orchestrators probe a few times a minute


class _DeadlineReader(io.RawIOBase):
    """A socket reader that gives up once the request's whole deadline has passed,
    however the bytes trickle in (a per-read timeout alone lets a client that sends
    one byte every few seconds hold a thread forever)."""

    def __init__(self, sock: socket.socket, deadline: float) -> None:
        self._sock = sock
        self._deadline = deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        self._sock.settimeout(left)
        return self._sock.recv_into(buffer)


class _BoundedServer(ThreadingHTTPServer):
    """``ThreadingHTTPServer`` with at most ``MAX_CONNECTIONS`` requests in hand: a
    connection over the cap is closed at accept, without a thread."""

    daemon_threads = True
    request_queue_size = 128  # a burst waits in the kernel's queue, not in threads

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        self.refused = 0  # connections closed at accept because every slot was taken
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.refused += 1
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class HealthListener:
    def __init__(self, launcher: Any, port: int, host: str = "127.0.0.1") -> None:
        self.launcher = launcher
        self.port = port
        self.host = host
        self.server: ThreadingHTTPServer | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._redis: redis_lib.Redis | None = None

    # -- lifecycle ---------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="wurk-health", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        warned = False
        while not self._stop.is_set():
            try:
                server = _BoundedServer((self.host, self.port), _handler(self))
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    logger.error("health listener cannot bind %s port %s: %s", self.host, self.port, exc)
                    return
                if not warned:
                    warned = True
                    logger.info("health port %s is in use (another swarm child?); retrying every %.0fs",
                                self.port, RETRY_BIND)
                self._stop.wait(RETRY_BIND)
                continue
            self.server = server
            logger.info("health listener on %s port %s (/live, /ready)", self.host, self.port)
            server.serve_forever(poll_interval=0.25)
            return

    def stop(self) -> None:
        self._stop.set()
        server = self.server
        if server is not None:
            server.shutdown()
            server.server_close()
        if self._thread is not None:
            self._thread.join(3)
        if self._redis is not None:
            self._redis.connection_pool.disconnect()

    # -- the checks --------------------------------------------------------------

    def live(self) -> tuple[bool, list[str]]:
        # 503 from quiet on, as the spec has it: a quiet process never fetches again, so
        # for an orchestrator it is on its way out (RUN-201).
        launcher = self.launcher
        if launcher.stopped.is_set():
            return False, ["stopped"]
        if launcher.stopping:
            return False, ["stopping"]
        if launcher.quieting:
            return False, ["quiet"]
        return True, []

    def ready(self) -> tuple[bool, list[str]]:
        reasons = []
        launcher = self.launcher
        if launcher.stopped.is_set():
            reasons.append("stopped")
        elif launcher.quieting:
            reasons.append("quiet")
        else:
            idle_for = time.monotonic() - launcher.state.last_fetch
            all_busy = launcher.state.busy_count() >= launcher.concurrency
            if idle_for > READY_WINDOW and not all_busy:
                reasons.append(f"no fetch for {idle_for:.0f}s")
        try:
            self._client().ping()
        except Exception as exc:
            reasons.append(f"redis: {exc.__class__.__name__}")
        return not reasons, reasons

    def _client(self) -> redis_lib.Redis:
        if self._redis is None:
            # The factory's probe client: one connection, short timeouts, and the
            # configured topology (Sentinel has no redis:// URL to build one from).
            self._redis = probe_redis(self.launcher.config, timeout=PING_TIMEOUT)
        return self._redis


def _handler(listener: HealthListener) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def setup(self) -> None:
            super().setup()
            self.rfile = io.BufferedReader(_DeadlineReader(self.connection, time.monotonic() + READ_TIMEOUT))

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            path = self.path.split("?", 1)[0].rstrip("/")
            if path == "/live":
                ok, reasons = listener.live()
            elif path == "/ready":
                ok, reasons = listener.ready()
            else:
                self._send(404, {"error": "try /live or /ready"})
                return
            self._send(200 if ok else 503, {"status": "ok" if ok else "unavailable", "reasons": reasons,
                                            "identity": listener.launcher.state.identity})

        def _send(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # probes every few seconds would drown the job log

    return Handler
