"""HTTP health probes for container orchestrators (``manage.py wurk --health-port``).

``GET /live`` answers 200 while the worker process is running and fetching,
503 once it is quiet or stopping (a quiet process only ever stops), or once it
can no longer fetch: more job threads abandoned by hard stops and still stuck than
``ABANDONED_THREADS_LIMIT`` (it then restarts itself), or a job thread it could
not replace.
``GET /ready`` answers 200 only while Redis answers a PING and the process is
fetching: not quiet, and a processor came back from a fetch within the last
30 seconds (or every processor is busy with a job). Anything else is 503 with
the reasons in a small JSON body. Both bodies carry the process identity
(host:pid:nonce); nothing else is exposed.

The listener binds ``WURK["HEALTH_BIND"]`` (127.0.0.1 unless set: a probe from
the same host or pod, never the whole network). Idle or slow clients cannot
starve the probes (issue 43 item 5): one thread serves every connection
without blocking (non-blocking accept and reads, a selector), a request must
arrive whole within ``READ_TIMEOUT`` seconds of the connect (a client
trickling bytes is cut off too) and its answer be taken within
``WRITE_TIMEOUT``, and at most ``MAX_CONNECTIONS`` are open at once: a
newcomer past the cap closes the *oldest* connection that has not sent a whole
request yet. A probe sends its request with the connect, so it is answered
before any flood of idle sockets can push it out, however fast they reopen.
``/ready``'s Redis PING runs in a thread of its own, one at a time; every
``/ready`` that arrives meanwhile shares its answer, so no number of requests
makes more than one PING or one extra thread. The Redis PING goes through the
same client factory as the rest of the worker (:func:`~wurk_django.redis.connection.probe_redis`),
so it reaches Redis however it is configured: a URL, TLS, a Unix socket or
Sentinel. Swarm children share one port: the first child to bind it serves;
the others retry every 5 seconds, so the port outlives any one child.
"""

from __future__ import annotations

import errno
import json
import logging
import selectors
import socket
import threading
import time
from typing import Any

import redis as redis_lib

from ..redis.connection import probe_redis

logger = logging.getLogger("wurk_django.worker")

READY_WINDOW = 30.0  # seconds since a processor last came back from a fetch
RETRY_BIND = 5.0  # seconds between tries at a port another process holds
PING_TIMEOUT = 1.0  # a probe's own timeout is often 1 s
READ_TIMEOUT = 2.0  # seconds from the connect for the whole request; a probe sends one in microseconds
WRITE_TIMEOUT = 2.0  # seconds for the client to take the answer (a few hundred bytes)
MAX_CONNECTIONS = 64  # open at once; past it the oldest not yet answered is closed for the newcomer
MAX_REQUEST = 8192  # bytes of request line and headers; a probe's are ~100
ACCEPTS_PER_TURN = 64  # accepts between two rounds of reads and deadlines
POLL = 0.25  # seconds the loop waits at most, so a stop is seen quickly

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 503: "Service Unavailable"}


class _Conn:
    """One client connection: what it sent, what it is owed, and its deadline."""

    __slots__ = ("sock", "opened", "deadline", "inbox", "outbox", "state", "head")

    def __init__(self, sock: socket.socket, now: float) -> None:
        self.sock = sock
        self.opened = now
        self.deadline = now + READ_TIMEOUT
        self.inbox = b""
        self.outbox = b""
        self.state = "reading"  # then "waiting" (for the shared PING) or "writing"
        self.head = False  # a HEAD request: headers only


class ProbeServer:
    """The health port's server: a single thread and a selector (see the module's
    docstring for the limits it keeps). ``answer(path)`` gives ``(status, body)``
    for ``/live`` and the like; ``/ready`` is ``ready_state()`` plus the shared PING
    from ``ping()`` (``None`` or a reason)."""

    def __init__(self, address: tuple[str, int], answer: Any, ready_state: Any, ping: Any) -> None:
        family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.socket = socket.create_server(address, family=family, backlog=128)
        self.socket.setblocking(False)
        self.server_address = self.socket.getsockname()
        self._answer, self._ready_state, self._ping = answer, ready_state, ping
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._conns: dict[int, _Conn] = {}  # fileno -> connection, in the order they were accepted
        self._waiting: list[_Conn] = []  # /ready requests owed the PING in flight
        self._pinging = False
        self._ping_result: tuple[str | None] | None = None  # set by the ping thread
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self.evicted = 0  # connections closed to make room for a newer one
        self.timed_out = 0  # connections closed at their deadline
        self.answered = 0

    @property
    def refused(self) -> int:  # the name the tests of the thread-per-request server used
        return self.evicted

    def open_connections(self) -> int:
        return len(self._conns)

    # -- the loop ------------------------------------------------------------------

    def serve_forever(self, poll_interval: float = POLL) -> None:
        self._selector.register(self.socket, selectors.EVENT_READ, "accept")
        self._selector.register(self._wake_r, selectors.EVENT_READ, "wake")
        try:
            while not self._stop.is_set():
                try:
                    self._turn(poll_interval)
                except Exception:  # never let one bad turn close the port
                    logger.exception("health listener: a loop turn failed")
                    time.sleep(0.05)
        finally:
            self._stopped.set()

    def _turn(self, poll_interval: float) -> None:
        now = time.monotonic()
        deadlines = [c.deadline for c in self._conns.values() if c.state != "waiting"]
        timeout = min([poll_interval, *[max(0.0, d - now) for d in deadlines]])
        for key, events in self._selector.select(timeout):
            if key.data == "accept":
                self._accept()
            elif key.data == "wake":
                self._drain_wake()
            else:
                conn = key.data
                if conn.sock.fileno() in self._conns:
                    if events & selectors.EVENT_READ and conn.state == "reading":
                        self._read(conn)
                    elif events & selectors.EVENT_WRITE and conn.state == "writing":
                        self._write(conn)
        self._deliver_ping()
        now = time.monotonic()
        for conn in [c for c in self._conns.values() if c.state != "waiting" and c.deadline <= now]:
            self.timed_out += 1
            self._close(conn)

    def _accept(self) -> None:
        for _ in range(ACCEPTS_PER_TURN):
            try:
                sock, _address = self.socket.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # out of file descriptors, say: try again next turn
                logger.warning("health listener cannot accept: %s", exc)
                return
            sock.setblocking(False)
            if len(self._conns) >= MAX_CONNECTIONS:
                self._evict()
            conn = _Conn(sock, time.monotonic())
            self._conns[sock.fileno()] = conn
            self._selector.register(sock, selectors.EVENT_READ, conn)
            self._read(conn)  # a probe's request came with its connect: answer it now

    def _evict(self) -> None:
        """Room for a newcomer: close the oldest connection that has not sent a whole
        request (an idle or trickling client); only if there is none, the oldest one."""
        victim = next((c for c in self._conns.values() if c.state == "reading"), None)
        if victim is None:
            victim = next(iter(self._conns.values()))
        self.evicted += 1
        self._close(victim)

    def _read(self, conn: _Conn) -> None:
        try:
            data = conn.sock.recv(MAX_REQUEST)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        if not data:
            self._close(conn)
            return
        conn.inbox += data
        end = conn.inbox.find(b"\r\n\r\n")
        if end < 0:
            end = conn.inbox.find(b"\n\n")
        if end < 0:
            if len(conn.inbox) > MAX_REQUEST:
                self._respond(conn, 400, {"error": "request too large"})
            return
        self._handle(conn, conn.inbox[:end].decode("latin-1"))

    def _handle(self, conn: _Conn, head: str) -> None:
        parts = head.split("\n", 1)[0].strip().split()
        if len(parts) != 3 or not parts[2].startswith("HTTP/"):
            self._respond(conn, 400, {"error": "not an HTTP request"})
            return
        method, target = parts[0], parts[1]
        conn.head = method == "HEAD"
        if method not in ("GET", "HEAD"):
            self._respond(conn, 405, {"error": "GET or HEAD"}, extra="Allow: GET, HEAD\r\n")
            return
        path = target.split("?", 1)[0].rstrip("/")
        if path != "/ready":
            self._respond(conn, *self._answer(path))
            return
        conn.state = "waiting"
        self._selector.unregister(conn.sock)
        self._waiting.append(conn)
        if not self._pinging:
            self._pinging = True
            threading.Thread(target=self._run_ping, name="wurk-health-ping", daemon=True).start()

    def _run_ping(self) -> None:
        try:
            reason = self._ping()
        except Exception as exc:  # the check itself must not leave the waiters hanging
            reason = f"redis: {exc.__class__.__name__}"
        with self._lock:
            self._ping_result = (reason,)
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass  # the loop is gone or its pipe full: it looks at the result each turn anyway

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except (BlockingIOError, InterruptedError):
            pass

    def _deliver_ping(self) -> None:
        with self._lock:
            result, self._ping_result = self._ping_result, None
        if result is None:
            return
        self._pinging = False
        waiting, self._waiting = self._waiting, []
        reasons = self._ready_state()
        if result[0]:
            reasons.append(result[0])
        for conn in waiting:
            if conn.sock.fileno() in self._conns:
                self._selector.register(conn.sock, selectors.EVENT_READ, conn)
                self._respond(conn, *_status_body(reasons, self._answer.identity()))

    def _respond(self, conn: _Conn, status: int, body: dict, extra: str = "") -> None:
        data = json.dumps(body).encode()
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\nCache-Control: no-store\r\nConnection: close\r\n{extra}\r\n")
        conn.outbox = head.encode() + (b"" if conn.head else data)
        conn.state = "writing"
        conn.deadline = time.monotonic() + WRITE_TIMEOUT
        self.answered += 1
        self._selector.modify(conn.sock, selectors.EVENT_WRITE, conn)
        self._write(conn)

    def _write(self, conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.outbox)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(conn)
            return
        conn.outbox = conn.outbox[sent:]
        if not conn.outbox:
            self._close(conn)

    def _close(self, conn: _Conn) -> None:
        fileno = conn.sock.fileno()
        self._conns.pop(fileno, None)
        if conn in self._waiting:
            self._waiting.remove(conn)
        try:
            self._selector.unregister(conn.sock)
        except (KeyError, ValueError):
            pass
        conn.sock.close()

    # -- stopping ------------------------------------------------------------------

    def shutdown(self) -> None:
        self._stop.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._stopped.wait(3)

    def server_close(self) -> None:
        for conn in list(self._conns.values()):
            self._close(conn)
        self._selector.close()
        self.socket.close()
        self._wake_r.close()
        self._wake_w.close()


def _status_body(reasons: list[str], identity: str) -> tuple[int, dict]:
    ok = not reasons
    return 200 if ok else 503, {"status": "ok" if ok else "unavailable", "reasons": reasons, "identity": identity}


class _Answers:
    """``/live`` and every path but ``/ready``, answered at once in the loop."""

    def __init__(self, listener: HealthListener) -> None:
        self.listener = listener

    def identity(self) -> str:
        return self.listener.launcher.state.identity

    def __call__(self, path: str) -> tuple[int, dict]:
        if path == "/live":
            return _status_body(self.listener.live()[1], self.identity())
        return 404, {"error": "try /live or /ready"}


class HealthListener:
    def __init__(self, launcher: Any, port: int, host: str = "127.0.0.1") -> None:
        self.launcher = launcher
        self.port = port
        self.host = host
        self.server: ProbeServer | None = None
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
                server = ProbeServer((self.host, self.port), _Answers(self), self._state_reasons, self._redis_reason)
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
            server.serve_forever(poll_interval=POLL)
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
        # A process that can no longer fetch is of no use alive: too many job threads
        # abandoned and stuck (it restarts itself), a job thread it could not replace.
        trouble = [reason for manager in getattr(launcher, "managers", ()) for reason in manager.fetch_trouble()]
        if trouble:
            return False, trouble
        return True, []

    def ready(self) -> tuple[bool, list[str]]:
        reasons = self._state_reasons()
        redis_reason = self._redis_reason()
        if redis_reason:
            reasons.append(redis_reason)
        return not reasons, reasons

    def _state_reasons(self) -> list[str]:
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
        return reasons

    def _redis_reason(self) -> str | None:
        try:
            self._client().ping()
        except Exception as exc:
            return f"redis: {exc.__class__.__name__}"
        return None

    def _client(self) -> redis_lib.Redis:
        if self._redis is None:
            # The factory's probe client: one connection, short timeouts, and the
            # configured topology (Sentinel has no redis:// URL to build one from).
            self._redis = probe_redis(self.launcher.config, timeout=PING_TIMEOUT)
        return self._redis
