#!/usr/bin/env python
"""A delaying TCP proxy on loopback: Redis at a cloud's distance for the benchmarks.

    python bench/latency_proxy.py --upstream 127.0.0.1:6379 --down-ms 1          # prints "listening HOST:PORT"
    python bench/latency_proxy.py --listen 127.0.0.1:7999 --upstream 127.0.0.1:6379 --down-ms 0.5 --up-ms 0.5
    python bench/latency_proxy.py --upstream 127.0.0.1:6379 --down-ms 1 --procs 2 # two processes share the port

This machine kind's kernel has no ``netem``, so a round trip to a Redis 0.3-1 ms
away (managed Redis in a cloud) is made here: every byte read from one side
reaches the other ``--up-ms`` (client to server) or ``--down-ms`` (server to
client) later, in the order it came, on every connection. ``--down-ms 1`` is
what Sidekiq's ``bin/sidekiqload`` sets up with Toxiproxy (a latency toxic on
the downstream): each round trip gains 1 ms, a pipeline of any length 1 ms.

One asyncio loop per process, on ``select()`` rather than epoll: epoll's
timeout counts whole milliseconds, so each wait is rounded up to one (a
0.3 ms delay became 1 ms: PING p50 1.54 ms through it on epoll, 0.83 ms on
``select()``, which wakes within microseconds). Forwarding itself costs a
round trip some tenths of a millisecond more (Python on both hops): the
benchmarks print a PING's round trip through the proxy beside the delay
asked for, and a run aiming at a round trip of X ms can set the delay so
that the PING reads X. ``select()`` holds
sockets numbered below 1024, about 500 proxied connections a process: above
that, ``--procs N`` (N processes accepting on one listening socket) or
``--epoll``. Its own CPU is the bench's to measure (bench/run.py reads the
process tree's /proc like a worker's); it exits on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


class Delay:
    """One direction of one proxied connection: bytes fed in reach ``dest`` ``delay`` seconds later.

    Arrival times only grow and the delay is constant, so a FIFO of (due, bytes) keeps the
    order; one timer at a time, for the head, and every chunk already due leaves in one write.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float) -> None:
        self.loop = loop
        self.delay = delay
        self.queue: collections.deque[tuple[float, bytes]] = collections.deque()
        self.timer: asyncio.TimerHandle | None = None
        self.dest: asyncio.Transport | None = None
        self.closing = False

    def attach(self, dest: asyncio.Transport) -> None:
        """The other side is connected: what waited for it leaves when due."""
        self.dest = dest
        self._arm()

    def feed(self, data: bytes) -> None:
        if self.delay <= 0 and not self.queue and self.dest is not None:
            self.dest.write(data)
            return
        self.queue.append((self.loop.time() + self.delay, data))
        if self.timer is None:
            self._arm()

    def close_after(self) -> None:
        """The source has closed: close the destination once the bytes in flight are delivered."""
        self.closing = True
        if self.timer is None:
            self._arm()

    def drop(self) -> None:
        """The destination is gone: nothing more to deliver."""
        self.queue.clear()
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        self.dest = None

    def _arm(self) -> None:
        if self.dest is None or self.timer is not None:
            return
        if self.queue:
            self.timer = self.loop.call_at(self.queue[0][0], self._deliver)
        elif self.closing and not self.dest.is_closing():
            self.dest.close()  # a transport's close() still sends what it has buffered

    def _deliver(self) -> None:
        self.timer = None
        if self.dest is None:
            return
        now = self.loop.time()
        queue = self.queue
        chunks = []
        while queue and queue[0][0] <= now:
            chunks.append(queue.popleft()[1])
        if chunks and not self.dest.is_closing():
            self.dest.write(chunks[0] if len(chunks) == 1 else b"".join(chunks))
        self._arm()


class ClientSide(asyncio.Protocol):
    """A connection accepted from a client; it opens its own connection to the upstream."""

    def __init__(self, upstream: tuple[str, int], up: float, down: float) -> None:
        self.upstream_addr = upstream
        self.up_delay, self.down_delay = up, down
        self.transport: asyncio.Transport | None = None
        self.server: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        loop = asyncio.get_running_loop()
        self.transport = transport  # type: ignore[assignment]
        self.up = Delay(loop, self.up_delay)
        self.down = Delay(loop, self.down_delay)
        self.down.attach(self.transport)  # type: ignore[arg-type]
        loop.create_task(self._connect(loop))

    async def _connect(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            await loop.create_connection(lambda: ServerSide(self), *self.upstream_addr)
        except OSError as exc:
            print(f"latency_proxy: upstream {self.upstream_addr}: {exc}", file=sys.stderr, flush=True)
            if self.transport is not None:
                self.transport.close()

    def data_received(self, data: bytes) -> None:
        self.up.feed(data)

    def eof_received(self) -> bool:
        self.up.close_after()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.down.drop()
        self.up.close_after()

    # The server side writes to this client: when the client reads slower than the server
    # answers, stop reading the server until the client's buffer drains.
    def pause_writing(self) -> None:
        if self.server is not None:
            self.server.pause_reading()

    def resume_writing(self) -> None:
        if self.server is not None:
            self.server.resume_reading()


class ServerSide(asyncio.Protocol):
    """The proxy's connection to the upstream, on behalf of one client."""

    def __init__(self, client: ClientSide) -> None:
        self.client = client

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.client.server = transport  # type: ignore[assignment]
        self.client.up.attach(transport)  # type: ignore[arg-type]

    def data_received(self, data: bytes) -> None:
        self.client.down.feed(data)

    def eof_received(self) -> bool:
        self.client.down.close_after()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.up.drop()
        self.client.down.close_after()

    def pause_writing(self) -> None:
        if self.client.transport is not None:
            self.client.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.client.transport is not None:
            self.client.transport.resume_reading()


async def serve(sock: socket.socket, upstream: tuple[str, int], up: float, down: float) -> None:
    """Proxy every connection accepted on ``sock`` until cancelled."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: ClientSide(upstream, up, down), sock=sock)
    stop = loop.create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, lambda: stop.done() or stop.set_result(None))
    try:
        await stop
    finally:
        server.close()


def run_loop(sock: socket.socket, upstream: tuple[str, int], up: float, down: float, epoll: bool) -> None:
    selector = selectors.EpollSelector() if epoll else selectors.SelectSelector()
    loop = asyncio.SelectorEventLoop(selector)
    try:
        loop.run_until_complete(serve(sock, upstream, up, down))
    finally:
        loop.close()


def spawn(url: str, down_ms: float, procs: int = 1, up_ms: float = 0.0,
          log_path: Path | None = None) -> tuple[subprocess.Popen, str]:
    """This proxy in a process of its own in front of ``url``'s server, as the benchmarks use
    it: (the process, ``url`` through the proxy). Stop it with stop()."""
    from urllib.parse import urlsplit, urlunsplit

    parts = urlsplit(url)
    if log_path:
        Path(log_path).parent.mkdir(parents=True, exist_ok=True)  # a fresh machine has no output folder yet
    err = open(log_path, "ab") if log_path else subprocess.DEVNULL
    proc = subprocess.Popen([sys.executable, __file__, "--upstream", f"{parts.hostname}:{parts.port or 6379}",
                             "--down-ms", str(down_ms), "--up-ms", str(up_ms), "--procs", str(procs)],
                            stdout=subprocess.PIPE, stderr=err, text=True)
    if log_path:
        err.close()
    line = proc.stdout.readline().split()  # "listening HOST:PORT"
    if not line or line[0] != "listening":
        stop(proc)
        raise RuntimeError(f"the latency proxy did not start (see {log_path})")
    netloc = line[1] if "@" not in parts.netloc else parts.netloc.rsplit("@", 1)[0] + "@" + line[1]
    return proc, urlunsplit(parts._replace(netloc=netloc))


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM (the proxy and its --procs children exit), then SIGKILL if it lingers."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def ping_ms(url: str, n: int = 200) -> dict:
    """p50 and p99 of a PING's round trip on one connection to ``url``, in ms."""
    import redis

    client = redis.Redis.from_url(url)
    client.ping()
    times = []
    for _ in range(n):
        start = time.perf_counter()
        client.ping()
        times.append((time.perf_counter() - start) * 1000)
    client.close()
    times.sort()
    return {"p50": times[n // 2], "p99": times[int(n * 0.99)]}


def address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--listen", default="127.0.0.1:0", help="HOST:PORT to accept on (port 0: any free one)")
    ap.add_argument("--upstream", default="127.0.0.1:6379", help="HOST:PORT of the Redis server")
    ap.add_argument("--down-ms", type=float, default=1.0, help="delay on bytes from the server to the client")
    ap.add_argument("--up-ms", type=float, default=0.0, help="delay on bytes from the client to the server")
    ap.add_argument("--procs", type=int, default=1, help="processes accepting on the one listening socket")
    ap.add_argument("--epoll", action="store_true", help="epoll (millisecond timers) instead of select()")
    args = ap.parse_args(argv)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(address(args.listen))
    sock.listen(1024)
    sock.setblocking(False)
    host, port = sock.getsockname()[:2]
    upstream, up, down = address(args.upstream), args.up_ms / 1000, args.down_ms / 1000
    print(f"listening {host}:{port}", flush=True)
    if args.procs <= 1:
        run_loop(sock, upstream, up, down, args.epoll)
        return
    # N children accept on the one socket (the kernel hands each connection to one of them);
    # this parent only forwards SIGTERM and reaps them.
    children = []
    for _ in range(args.procs):
        pid = os.fork()
        if pid == 0:
            try:
                run_loop(sock, upstream, up, down, args.epoll)
            finally:
                os._exit(0)
        children.append(pid)

    def forward(signum: int, _frame: object) -> None:
        for child in children:
            try:
                os.kill(child, signal.SIGTERM)
            except ProcessLookupError:
                pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    for child in children:
        while True:
            try:
                os.waitpid(child, 0)
                break
            except InterruptedError:
                continue
            except ChildProcessError:
                break


if __name__ == "__main__":
    main()
