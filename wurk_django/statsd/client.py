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
import itertools
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
        # The job path's tallies, one per (metric names, tag set); read and reset by the sender.
        self._agg_lock = threading.Lock()  # guards the tallies' dict, never a job's update
        self._tallies: dict[tuple[tuple[str, ...], str], JobTally] = {}
        self._retired: list[JobTally] = []  # tallies let go of, read once more by the sender
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
    # value. A job's metrics go to a JobTally kept per tag set, so a job costs two
    # attribute updates under one uncontended lock, and a round sends a line per tag set
    # per counter rather than a line per metric per job.

    def tail(self, tags: Iterable[str] | None, sample_rate: float | None = None) -> str:
        """The ``|@rate|#tags`` end of a line, formatted once per tag set."""
        tail = self._suffix(tags)
        return f"|@{sample_rate:g}{tail}" if sample_rate is not None and sample_rate < 1 else tail

    def job_tally(self, names: tuple[str, str, str, str, str], tail: str) -> JobTally:
        """The tally of one tag set (a :meth:`tail`) for the job metrics ``names`` =
        (started counter, success counter, failure counter, duration gauge, duration
        distribution). Keep it and call its ``started``/``finished``; the sender reads and
        resets it every round."""
        key = (names, tail)
        found = self._tallies.get(key)
        if found is None:
            with self._agg_lock:
                found = self._tallies.get(key)
                if found is None:
                    if len(self._tallies) >= MAX_TAG_SETS:
                        # Endless tag sets: start over. The old tallies are read once more;
                        # a job still holding one after that loses its update.
                        self._retired.extend(self._tallies.values())
                        self._tallies = {}
                    found = self._tallies[key] = JobTally(self, names, tail)
        if self._sender is None:
            self._start_sender()
        return found

    def _aggregated(self) -> list[str]:
        """The lines of what the job path gathered since the last round."""
        prefix = self._prefix
        lines: list[str] = []
        with self._agg_lock:
            tallies = [*self._tallies.values(), *self._retired]
            self._retired = []
        for tally in tallies:
            count, success, failure, last, values = tally.take()
            started, succeeded, failed, gauge, distribution = tally.names
            tail = tally.tail
            if count:
                lines.append(f"{prefix}{started}:{count}|c{tail}")
            if success:
                lines.append(f"{prefix}{succeeded}:{success}|c{tail}")
            if failure:
                lines.append(f"{prefix}{failed}:{failure}|c{tail}")
            if last is not None:
                lines.append(f"{prefix}{gauge}:{last:.3f}|g{tail}")  # durations in ms, to the microsecond
            if values:
                head, end = f"{prefix}{distribution}:", f"|d{tail}"
                lines.extend([f"{head}{v:.3f}{end}" for v in values])
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
        lines: list[str] = []
        queued = self._lines
        while queued:
            try:
                lines.append(queued.popleft())
            except IndexError:
                break
        lines.extend(self._aggregated())
        if not lines:
            return
        target = self._target()
        if target is None:
            self.dropped += len(lines)
            return
        # Cut one encoded text at newlines into datagrams of at most PACKET_SIZE bytes: a
        # search per datagram rather than a step per line.
        data = "\n".join(lines).encode("utf-8", "replace")
        start, end = 0, len(data)
        while start < end:
            stop = end if end - start <= PACKET_SIZE else data.rfind(b"\n", start, start + PACKET_SIZE + 1)
            if stop <= start:  # a line longer than a datagram (at most MAX_DATAGRAM): alone
                stop = data.find(b"\n", start)
                stop = end if stop == -1 else stop
            self._send_packet(target, data[start:stop])
            start = stop + 1

    def _send_packet(self, target: tuple[socket.socket, tuple], packet: bytes) -> None:
        sock, addr = target
        try:
            sock.sendto(packet, addr)
        except OSError:
            # Full buffer (BlockingIOError), refused port, network down: these metrics are lost.
            self.dropped += packet.count(b"\n") + 1

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


class JobTally:
    """One tag set's job metrics since the sender's last round (see
    :meth:`UDPClient.job_tally`).

    Thread-safe without a lock, so a job never waits for one: the counters are
    ``itertools.count`` objects (``next()`` is one atomic step; the sender reads
    one with a ``next()`` of its own and subtracts what it read before), the gauge
    is one attribute store, and the distribution values go through a deque
    (``append`` and ``popleft`` are atomic)."""

    __slots__ = ("names", "tail", "_count", "_success", "_failure", "_read", "last", "values", "_client")

    def __init__(self, client: UDPClient, names: tuple[str, str, str, str, str], tail: str) -> None:
        self._client = client
        self.names = names
        self.tail = tail
        self._count, self._success, self._failure = itertools.count(), itertools.count(), itertools.count()
        self._read = [0, 0, 0]  # the next value each counter would have had without the sender's reads
        self.last: float | None = None
        self.values: deque[float] = deque()

    def started(self) -> None:
        """One job started: the started counter +1."""
        next(self._count)

    def finished(self, succeeded: bool, elapsed_ms: float) -> None:
        """One job ended: its outcome counted, its duration the gauge's value and one more
        distribution value (dropped and counted past ``MAX_QUEUED`` waiting values)."""
        next(self._success if succeeded else self._failure)
        self.last = elapsed_ms
        values = self.values
        if len(values) >= MAX_QUEUED:
            self._client.dropped += 1
        else:
            values.append(elapsed_ms)

    def take(self) -> tuple[int, int, int, float | None, list[float]]:
        """What was tallied since the last call, and reset (the sender's side)."""
        read = self._read
        counted = []
        for i, counter in enumerate((self._count, self._success, self._failure)):
            value = next(counter)
            counted.append(value - read[i])
            read[i] = value + 1
        last, self.last = self.last, None
        values = self.values
        taken = [values.popleft() for _ in range(len(values))]
        return counted[0], counted[1], counted[2], last, taken


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
        client._tallies, client._retired = {}, []
        client._lines.clear()
        client._udp = None
        client._sender = None


atexit.register(_flush_all)
os.register_at_fork(after_in_child=_after_fork)


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
