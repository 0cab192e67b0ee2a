"""Telling systemd how a worker is doing (``Type=notify``), without libsystemd.

systemd's notify protocol is one datagram of ``KEY=value`` lines sent to the
AF_UNIX socket named by ``$NOTIFY_SOCKET`` (an abstract socket when the name
starts with ``@``). A worker sends ``READY=1`` once its processors are fetching,
``STOPPING=1`` when it begins to stop, and ``STATUS=`` lines that
``systemctl status`` shows. With ``WatchdogSec=`` in the unit, systemd sets
``$WATCHDOG_USEC`` and expects ``WATCHDOG=1`` at least that often:
:class:`Watchdog` sends it from the loop that handles the process's signals,
so a ping proves that this loop still turns, i.e. that a ``TERM`` would still
be acted on. It proves nothing about jobs: a worker whose Redis is down keeps
pinging, as it should (it waits and retries by itself).

Without ``$NOTIFY_SOCKET`` every call returns at once, having done nothing.
"""

from __future__ import annotations

import logging
import os
import socket
import time

logger = logging.getLogger("wurk_django.worker")

ENV = "NOTIFY_SOCKET"


def enabled() -> bool:
    """True when this process was started by systemd with ``Type=notify`` (or anything
    else that set ``$NOTIFY_SOCKET``)."""
    return bool(os.environ.get(ENV))


def notify(*lines: str) -> bool:
    """Send ``lines`` (``"READY=1"``, ``"STATUS=..."``) as one message to systemd.

    Returns True when a message was sent; False when the process is not run by
    systemd (no ``$NOTIFY_SOCKET``) or the socket refused it. Never raises: a
    worker does not stop because its supervisor is not listening.
    """
    address = os.environ.get(ENV)
    if not address or not lines:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]  # Linux abstract namespace
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall("\n".join(lines).encode())
        return True
    except OSError as exc:
        logger.warning("could not notify systemd at %s: %s", os.environ.get(ENV), exc)
        return False


class Watchdog:
    """``WATCHDOG=1`` every half of ``$WATCHDOG_USEC``, as sd_watchdog_enabled(3) advises.

    Call :meth:`tick` from a loop that runs at least that often; it costs one
    clock read between pings, and nothing at all when the watchdog is off.
    """

    def __init__(self) -> None:
        self.interval = watchdog_interval()
        self._last = 0.0

    def tick(self) -> None:
        if self.interval is None:
            return
        now = time.monotonic()
        if now - self._last >= self.interval:
            self._last = now
            notify("WATCHDOG=1")


def watchdog_interval() -> float | None:
    """Seconds between watchdog pings, or None when systemd expects none from this process.

    ``$WATCHDOG_PID``, when set, names the one process the watchdog is meant for:
    a child that inherited the environment must not ping in its parent's name.
    """
    if not os.environ.get(ENV):
        return None
    try:
        usec = int(os.environ.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    pid = os.environ.get("WATCHDOG_PID")
    if usec <= 0 or (pid and pid != str(os.getpid())):
        return None
    return usec / 2_000_000
