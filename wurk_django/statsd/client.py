"""A DogStatsD client over UDP that can never hold a job up.

The socket is non-blocking: a datagram the kernel cannot take at once (send
buffer full, nobody listening and an ICMP error pending, a resolver that
fails) is dropped and counted, never waited for. One datagram per metric, in
the DogStatsD text format ``name:value|type[|@rate][|#tag,tag]``.

The method names and arguments are those of ``datadog.dogstatsd.DogStatsd``,
so a project that already has that client can hand it over instead (see
``WURK["STATSD"]["CLIENT"]``).
"""

from __future__ import annotations

import logging
import random
import socket
import threading
from collections.abc import Iterable

logger = logging.getLogger("wurk_django.statsd")

# Datagrams larger than this are fragmented or dropped on most paths; a metric
# line is far shorter, so this only guards against absurd tag lists.
MAX_DATAGRAM = 8192


class UDPClient:
    """Fire-and-forget DogStatsD client. Thread-safe (one ``sendto`` per metric)."""

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
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._addr: tuple | None = None
        self._warned = False

    def _socket(self) -> tuple[socket.socket, tuple] | None:
        if self._sock is None:
            with self._lock:
                if self._sock is None:
                    try:
                        # Resolved once: a DNS lookup per metric could block a job.
                        family, _t, _p, _c, addr = socket.getaddrinfo(self.host, self.port, 0, socket.SOCK_DGRAM)[0]
                        sock = socket.socket(family, socket.SOCK_DGRAM)
                        sock.setblocking(False)
                    except OSError as exc:
                        self._warn(f"cannot reach statsd at {self.host}:{self.port} ({exc}); metrics are dropped")
                        return None
                    self._addr = addr
                    self._sock = sock
        return self._sock, self._addr  # type: ignore[return-value]

    def _warn(self, message: str) -> None:
        if not self._warned:
            self._warned = True
            logger.warning(message)

    def close(self) -> None:
        with self._lock:
            if self._sock is not None:
                self._sock.close()
            self._sock = None

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

    # -------------------------------------------------------------------------

    def _report(self, metric: str, kind: str, value: float, tags: Iterable[str] | None,
                sample_rate: float | None) -> None:
        if sample_rate is not None and sample_rate < 1 and random.random() >= sample_rate:
            return
        line = format_metric(f"{self.namespace}.{metric}" if self.namespace else metric, kind, value,
                             [*self.constant_tags, *(tags or ())], sample_rate)
        self.send(line.encode("utf-8", "replace"))

    def send(self, datagram: bytes) -> None:
        if len(datagram) > MAX_DATAGRAM:
            self.dropped += 1
            return
        target = self._socket()
        if target is None:
            self.dropped += 1
            return
        sock, addr = target
        try:
            sock.sendto(datagram, addr)
        except OSError:
            # Full buffer (BlockingIOError), refused port, network down: the
            # metric is lost, the job is not slowed. Counted for the curious.
            self.dropped += 1


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
