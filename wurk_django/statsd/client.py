"""A DogStatsD client over UDP that can never hold a job up.

A job thread only records its metrics in memory: the job middleware's are
aggregated (counters summed, a gauge's last value kept, every distribution
value kept), any other metric is formatted and appended to a bounded queue.
One sender thread per process takes them from there about every
``SEND_INTERVAL`` seconds, packs the lines into datagrams (several lines each,
newline-separated, as DogStatsD reads them) and sends them. So a job thread
never waits on a socket, a name lookup or a lock held for longer than a few
dictionary updates:

* the host name is looked up by the sender thread, once; the address is kept.
  A lookup that fails is remembered for ``RETRY_LOOKUP`` seconds, during which
  lines are dropped and counted; then the sender thread tries again;
* when the queue already holds ``MAX_QUEUED`` lines (statsd unreachable, the
  sender thread starved), a new line is dropped and counted, never waited for;
* a datagram the kernel refuses (full buffer, an ICMP error pending) is
  dropped and counted.

``dropped`` counts every line lost that way. The method names and arguments
are those of ``datadog.dogstatsd.DogStatsd``, so a project that already has
that client can hand it over instead (see ``WURK["STATSD"]["CLIENT"]``).
"""

from __future__ import annotations

import atexit
import logging
import os
import random
import socket
import threading
import time
import weakref
from collections import deque
from collections.abc import Iterable

logger = logging.getLogger("wurk_django.statsd")

# A datagram of this size fits in one Ethernet frame on any path; a line longer
# than MAX_DATAGRAM (absurd tag lists) is dropped rather than fragmented.
PACKET_SIZE = 1432
MAX_DATAGRAM = 8192
MAX_QUEUED = 20_000  # lines (and distribution values) waiting for the sender thread; more are dropped
WAKE_AT = 1_000  # lines queued that wake the sender before its next round
SEND_INTERVAL = 0.1  # seconds between the sender thread's rounds
RETRY_LOOKUP = 30.0  # seconds a failed name lookup is remembered before the next try
MAX_TAG_SETS = 4096  # formatted tag suffixes kept; a workload with more starts over

_clients: weakref.WeakSet[UDPClient] = weakref.WeakSet()


class UDPClient:
    """Fire-and-forget DogStatsD client. Thread-safe; see the module docstring."""

    def __init__(self, host: str = "127.0.0.1", port: int = 8125, *, tags: Iterable[str] = (),
                 namespace: str | None = None) -> None:
        if not isinstance(host, str) or not host:
            raise ValueError(f"statsd host must be a non-empty string, not {host!r}")
        if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise ValueError(f"statsd port must be an integer from 1 to 65535, not {port!r}")
        self.host = host
        self.port = port
        self.constant_tags = [str(t) for t in tags]
        self.namespace = namespace
        self.dropped = 0
        self.lookups = 0  # name lookups made, for the curious and the tests
        self._prefix = _clean(f"{namespace}.", ":|@#") if namespace else ""
        self._lines: deque[str] = deque()
        # The job path's aggregates, keyed by (name, kind, rate and tags), swapped out by the sender.
        self._agg_lock = threading.Lock()
        self._counts: dict[tuple[str, str, str], float] = {}
        self._gauges: dict[tuple[str, str, str], float] = {}
        self._values: dict[tuple[str, str, str], list[float]] = {}
        self._pending = 0  # values held in _values
        self._suffixes: dict[tuple[str, ...], str] = {}
        self._lock = threading.Lock()  # starts the sender; never taken on a job's path once it runs
        self._sender: threading.Thread | None = None  # started by the first metric (again after a fork)
        self._wake = threading.Event()
        self._closed = False
        self._udp: socket.socket | None = None
        self._addr: tuple | None = None
        self._lookup_failed_at: float | None = None
        self._warned = False
        _clients.add(self)

    # -- the DogStatsd surface --------------------------------------------------

    def increment(self, metric: str, value: float = 1, tags: Iterable[str] | None = None,
                  sample_rate: float | None = None) -> None:
        self._report(metric, "c", value, tags, sample_rate)

    def decrement(self, metric: str, value: float = 1, tags: Iterable[str] | None = None,
                  sample_rate: float | None = None) -> None:
        self._report(metric, "c", -value, tags, sample_rate)

    def gauge(self, metric: str, value: float, tags: Iterable[str] | None = None,
              sample_rate: float | None = None) -> None:
        self._report(metric, "g", value, tags, sample_rate)

    def histogram(self, metric: str, value: float, tags: Iterable[str] | None = None,
                  sample_rate: float | None = None) -> None:
        self._report(metric, "h", value, tags, sample_rate)

    def distribution(self, metric: str, value: float, tags: Iterable[str] | None = None,
                     sample_rate: float | None = None) -> None:
        self._report(metric, "d", value, tags, sample_rate)

    def timing(self, metric: str, value: float, tags: Iterable[str] | None = None,
               sample_rate: float | None = None) -> None:
        self._report(metric, "ms", value, tags, sample_rate)

    # -- the job thread's side: format and queue ----------------------------------

    def _report(self, metric: str, kind: str, value: float, tags: Iterable[str] | None,
                sample_rate: float | None) -> None:
        rate = ""
        if sample_rate is not None and sample_rate < 1:
            if random.random() >= sample_rate:
                return
            rate = f"|@{sample_rate:g}"
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if ":" in metric or "|" in metric or "@" in metric or "#" in metric or "\n" in metric or "\r" in metric:
            metric = _clean(metric, ":|@#")
        self.send_line(f"{self._prefix}{metric}:{value}|{kind}{rate}{self._suffix(tags)}")

    # -- the job middleware's path: aggregated until the sender's next round --------
    #
    # As the Datadog client does by default: counters are summed and a gauge keeps its
    # last value (what a statsd server makes of them anyway); distributions keep every
    # value. Per job that is a few dictionary updates under one uncontended lock, and
    # a line per tag set per round rather than a line per metric per job.

    def tail(self, tags: Iterable[str] | None, sample_rate: float | None = None) -> str:
        """The ``|@rate|#tags`` end of a line, formatted once per tag set."""
        tail = self._suffix(tags)
        return f"|@{sample_rate:g}{tail}" if sample_rate is not None and sample_rate < 1 else tail

    def add_count(self, metric: str, tail: str) -> None:
        """``metric`` +1 with a :meth:`tail`; summed until the sender's next round."""
        key = (metric, "c", tail)
        with self._agg_lock:
            self._counts[key] = self._counts.get(key, 0) + 1
        if self._sender is None:
            self._start_sender()

    def add_timing(self, counter: str, gauge: str, distribution: str, tail: str, value: float) -> None:
        """``counter`` +1, ``gauge`` and ``distribution`` set to ``value``, in one go."""
        counted = (counter, "c", tail)
        with self._agg_lock:
            self._counts[counted] = self._counts.get(counted, 0) + 1
            self._gauges[(gauge, "g", tail)] = value
            if self._pending >= MAX_QUEUED:
                self.dropped += 1
            else:
                self._pending += 1
                key = (distribution, "d", tail)
                values = self._values.get(key)
                if values is None:
                    self._values[key] = [value]
                else:
                    values.append(value)

    def _aggregated(self) -> list[str]:
        """The lines of what the job path gathered since the last round."""
        with self._agg_lock:
            counts, gauges, values = self._counts, self._gauges, self._values
            if not (counts or gauges or values):
                return []
            self._counts, self._gauges, self._values, self._pending = {}, {}, {}, 0
        prefix = self._prefix
        lines = [f"{prefix}{metric}:{_number(total)}|{kind}{tail}"
                 for source in (counts, gauges) for (metric, kind, tail), total in source.items()]
        for (metric, kind, tail), numbers in values.items():
            lines.extend(f"{prefix}{metric}:{_number(v)}|{kind}{tail}" for v in numbers)
        return lines

    def _suffix(self, tags: Iterable[str] | None) -> str:
        key = tuple(tags) if tags else ()
        suffix = self._suffixes.get(key)
        if suffix is None:
            every = [*self.constant_tags, *key]
            suffix = "|#" + ",".join(_clean(str(t), "|,#") for t in every) if every else ""
            if len(self._suffixes) >= MAX_TAG_SETS:
                self._suffixes.clear()
            self._suffixes[key] = suffix
        return suffix

    def send_line(self, line: str) -> None:
        """Queue one metric line for the sender thread; dropped (and counted) when the
        queue is full."""
        queued = len(self._lines)
        if queued >= MAX_QUEUED or len(line) > MAX_DATAGRAM or self._closed:
            self.dropped += 1
            return
        self._lines.append(line)  # deque.append is atomic: no lock on a job's path
        if queued == WAKE_AT:
            self._wake.set()  # a burst: the sender goes now rather than at its next round
        if self._sender is None:
            self._start_sender()

    def send(self, datagram: bytes) -> None:
        """Queue a ready-made datagram (one or more lines)."""
        for line in datagram.decode("utf-8", "replace").splitlines():
            self.send_line(line)

    def _start_sender(self) -> None:
        with self._lock:
            if self._sender is not None or self._closed:
                return
            sender = threading.Thread(target=self._run, name="wurk-statsd", daemon=True)
            sender.start()
            self._sender = sender

    # -- the sender thread ----------------------------------------------------------

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(SEND_INTERVAL)
            self._wake.clear()
            try:
                self.flush()
            except Exception:  # never let the sender die: metrics would pile up unsent
                logger.exception("sending statsd metrics failed")

    def flush(self) -> None:
        """Send what is queued now (the sender thread does it every ``SEND_INTERVAL``)."""
        lines = self._lines
        lines.extend(self._aggregated())
        if not lines:
            return
        target = self._target()
        packet: list[str] = []
        size = 0
        while lines:
            try:
                line = lines.popleft()
            except IndexError:
                break
            if target is None:
                self.dropped += 1
                continue
            if packet and size + len(line) + 1 > PACKET_SIZE:
                self._send_packet(target, packet)
                packet, size = [], 0
            packet.append(line)
            size += len(line) + 1
        if packet and target is not None:
            self._send_packet(target, packet)

    def _send_packet(self, target: tuple[socket.socket, tuple], packet: list[str]) -> None:
        sock, addr = target
        try:
            sock.sendto("\n".join(packet).encode("utf-8", "replace"), addr)
        except OSError:
            # Full buffer (BlockingIOError), refused port, network down: these metrics are lost.
            self.dropped += len(packet)

    def _target(self) -> tuple[socket.socket, tuple] | None:
        """The socket and address; looked up once, and a failed lookup is not tried
        again for ``RETRY_LOOKUP`` seconds (only ever on the sender thread)."""
        if self._udp is not None:
            return self._udp, self._addr  # type: ignore[return-value]
        failed_at = self._lookup_failed_at
        if failed_at is not None and time.monotonic() - failed_at < RETRY_LOOKUP:
            return None
        self.lookups += 1
        try:
            family, addr = resolve(self.host, self.port)
            sock = socket.socket(family, socket.SOCK_DGRAM)
            sock.setblocking(False)
        except OSError as exc:
            self._lookup_failed_at = time.monotonic()
            self._warn(f"cannot reach statsd at {self.host}:{self.port} ({exc}); metrics are dropped, "
                       f"the name is looked up again every {RETRY_LOOKUP:.0f}s")
            return None
        if self._lookup_failed_at is not None:
            logger.warning("statsd at %s:%s resolved; metrics are sent again", self.host, self.port)
        self._lookup_failed_at = None
        self._addr = addr
        self._udp = sock
        return sock, addr

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            logger.warning(message)

    def close(self) -> None:
        """Send what is queued, then stop the sender thread and close the socket."""
        try:
            self.flush()
        except Exception:
            pass
        self._closed = True
        self._wake.set()
        sender = self._sender
        if sender is not None and sender is not threading.current_thread():
            sender.join(1)
        with self._lock:
            if self._udp is not None:
                self._udp.close()
            self._udp = None


def resolve(host: str, port: int) -> tuple[int, tuple]:
    """The address family and address to send to (a name lookup: only on the sender thread)."""
    family, _type, _proto, _canon, addr = socket.getaddrinfo(host, port, 0, socket.SOCK_DGRAM)[0]
    return family, addr


def _flush_all() -> None:
    # At exit: the last jobs' metrics are still queued; one non-blocking send each.
    for client in list(_clients):
        try:
            client.flush()
        except Exception:
            pass


def _after_fork() -> None:
    # A child sends its own metrics on its own socket, with its own sender thread
    # (started by its first metric); the parent's queued lines are the parent's.
    for client in list(_clients):
        client._lock = threading.Lock()
        client._agg_lock = threading.Lock()
        client._counts, client._gauges, client._values, client._pending = {}, {}, {}, 0
        client._lines.clear()
        client._udp = None
        client._sender = None


atexit.register(_flush_all)
os.register_at_fork(after_in_child=_after_fork)


def _number(value: float) -> float:
    return int(value) if type(value) is float and value.is_integer() else value


def format_metric(name: str, kind: str, value: float, tags: list[str], sample_rate: float | None) -> str:
    """One DogStatsD line. ``|``, ``:``, ``,``, ``#`` and newlines are replaced in tags so a
    class or queue name cannot break the line format."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    line = f"{_clean(name, ':|@#')}:{value}|{kind}"
    if sample_rate is not None and sample_rate < 1:
        line += f"|@{sample_rate:g}"
    if tags:
        line += "|#" + ",".join(_clean(str(t), "|,#") for t in tags)
    return line


def _clean(text: str, forbidden: str) -> str:
    for ch in forbidden + "\n\r":
        if ch in text:
            text = text.replace(ch, "_")
    return text
