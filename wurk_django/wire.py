"""Command batches written and read straight on a redis-py connection's socket (RUN-706).

The fetch + ACK batch runs once per job, and a push once per enqueue. Going
through ``Connection.send_packed_command`` and ``read_response`` costs about
45 us of Python per batch (host strings for error messages, health-check and
observability hooks, a parser call per reply); packing with ``hiredis`` and
parsing with a ``hiredis.Reader`` kept beside the socket costs about 7 us for
the same bytes on the wire (bench/micro.py).

redis-py still owns the connection: it connects (AUTH, SELECT, TLS), and it
is what a failed batch disconnects. This module only talks on the socket
between those points, and only where that is the plain RESP2 stream it
expects: with hiredis missing, under RESP3 (push messages would interleave),
or on a connection class without a socket, :func:`usable` says no and the
caller takes redis-py's own path. TCP, TLS (``rediss://``: the socket is an
``ssl.SSLSocket``, whose ``sendall``/``recv_into`` carry plaintext) and Unix
sockets all qualify; tests/test_wire_transports.py runs each against its own
redis-server. So do Sentinel-managed connections: redis-py's
``SentinelManagedConnection.connect`` (called here when the socket is closed)
asks the sentinels for the primary, and a ``READONLY`` reply, which this path
returns instead of letting redis-py's Sentinel connection turn it into a
disconnect, makes the caller close the connection (``connection.send_on``).

Error replies are turned into redis-py's exception classes by the
connection's own parser (``ReadOnlyError``, ``NoScriptError``...), so callers
cannot tell the two paths apart.
"""

from __future__ import annotations

import errno
import socket
import struct
import sys
from typing import Any

import redis

try:
    import hiredis
except ImportError:  # redis[hiredis] is a dependency, but a stripped install must still work
    hiredis = None

_BUFFER = 65536
#: The largest command batch :func:`exchange` sends without letting go of the GIL
#: (``hold_gil=True``); a bigger one takes the usual ``sendall``.
HOLD_GIL_MAX = 16384


# Linux's struct timeval is two longs; elsewhere the socket keeps Python's own timeout.
_KERNEL_TIMEOUTS = sys.platform.startswith("linux")


def _send_holding_gil() -> Any:
    """libc's ``send``, called without letting go of the GIL (``ctypes.PyDLL``), or
    None where that cannot be had (no ctypes, no libc symbol)."""
    if not _KERNEL_TIMEOUTS:
        return None
    try:
        import ctypes

        send = ctypes.PyDLL(None).send
    except (ImportError, OSError, AttributeError):
        return None
    send.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int)
    send.restype = ctypes.c_ssize_t
    return send


_send = _send_holding_gil()
# Never wait for room in the socket buffer while holding the GIL, and never die of SIGPIPE.
_SEND_FLAGS = getattr(socket, "MSG_DONTWAIT", 0) | getattr(socket, "MSG_NOSIGNAL", 0)


class _State:
    """The reader for one socket; replaced whenever the connection reconnects."""

    __slots__ = ("sock", "reader", "buffer", "plain", "kernel_timeout")

    def __init__(self, sock: Any, parse_error: Any, encoder: Any = None) -> None:
        self.sock = sock
        # A plain TCP or Unix socket (not TLS, not a green-thread wrapper) can wait
        # with the kernel's timeout instead of Python's; see _wait_in_kernel.
        self.plain = _KERNEL_TIMEOUTS and type(sock) is socket.socket
        self.kernel_timeout: float | None = None
        if encoder is not None and encoder.decode_responses:
            # The replies a client built with decode_responses=True would give.
            self.reader = hiredis.Reader(protocolError=redis.InvalidResponse, replyError=parse_error,
                                         encoding=encoder.encoding, errors=encoder.encoding_errors)
        else:
            self.reader = hiredis.Reader(protocolError=redis.InvalidResponse, replyError=parse_error)
        self.buffer = bytearray(_BUFFER)


def usable(conn: Any) -> bool:
    """True when :func:`exchange` may run on ``conn``."""
    return (hiredis is not None and str(getattr(conn, "protocol", 2) or 2) == "2"
            and hasattr(conn, "_sock") and hasattr(conn, "connect"))


def exchange(conn: Any, commands: list[tuple[Any, ...]], hold_gil: bool = False) -> list[Any]:
    """Send ``commands`` in one write and return one reply per command.

    An error reply is returned in place as its exception (not raised); any I/O
    failure disconnects ``conn`` and raises redis-py's ``ConnectionError`` or
    ``TimeoutError``, as its own path would.

    ``hold_gil=True`` writes a small batch without letting go of the GIL: the
    caller waits for the reply straight after, and that wait lets go of it
    anyway. Letting go twice per round trip (for the write, then for the read)
    costs a second hand-over to another thread and back, which with ten
    threads each making a round trip per job is dearer than the write itself
    (job code's commands, ``app_redis``). The write never blocks
    (``MSG_DONTWAIT``): what the socket buffer cannot take at once goes
    through ``sendall`` as usual. The worker's own fetch does not ask for it:
    on a drain of empty jobs, where the other threads always have Python to
    run, holding the GIL through that write measured slower.
    """
    sock = conn._sock
    if sock is None:
        conn.connect()
        sock = conn._sock
    state = conn.__dict__.get("_wurk_wire")
    if state is None or state.sock is not sock:
        parser = getattr(conn, "_parser", None)
        parse_error = getattr(parser, "parse_error", None) or redis.ResponseError
        state = conn.__dict__["_wurk_wire"] = _State(sock, parse_error, getattr(conn, "encoder", None))
    try:
        pack = hiredis.pack_command
        data = b"".join([pack(command) for command in commands])
    except TypeError:
        raise _unpackable(commands) from None
    reader = state.reader
    replies: list[Any] = []
    try:
        if state.plain and sock.gettimeout() is not None:
            _wait_in_kernel(state, sock)
        if hold_gil and state.plain and _send is not None and len(data) <= HOLD_GIL_MAX:
            sent = _send(sock.fileno(), data, len(data), _SEND_FLAGS)
            if sent != len(data):  # EAGAIN, EINTR, an error (sendall meets it again and raises), or a part
                sock.sendall(data[sent:] if sent > 0 else data)
        else:
            sock.sendall(data)
        wanted = len(commands)
        while len(replies) < wanted:
            reply = reader.gets()
            if reply is False:
                read = sock.recv_into(state.buffer)
                if not read:
                    raise ConnectionResetError("Connection closed by server.")
                reader.feed(state.buffer, 0, read)
                continue
            replies.append(reply)
    except TimeoutError as exc:  # socket.timeout
        conn.disconnect()
        raise redis.TimeoutError(f"Timeout talking to Redis: {exc}") from exc
    except OSError as exc:
        conn.disconnect()
        if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):  # the kernel's timeout ran out
            raise redis.TimeoutError(f"Timeout talking to Redis after {state.kernel_timeout}s") from exc
        raise redis.ConnectionError(f"Error talking to Redis: {exc}") from exc
    except BaseException:
        conn.disconnect()  # a half-read stream cannot be used again
        raise
    return replies


def _wait_in_kernel(state: _State, sock: socket.socket) -> None:
    """Make ``sock`` blocking, with its timeout kept by the kernel (``SO_RCVTIMEO``,
    ``SO_SNDTIMEO``) instead of by Python.

    With a Python-level timeout, CPython calls ``poll()`` before every ``send``
    and ``recv`` and lets go of the GIL around both calls: a round trip costs four
    system calls and four GIL hand-overs instead of two. With ten threads doing
    round trips, those hand-overs are most of the worker's time (ten threads
    sending ``INCR`` on raw sockets ran 1.7-1.9x faster this way). The timeout is
    the same number, so a Redis that stops answering still fails the call after
    the connection's ``socket_timeout``. redis-py's own use of the connection
    is unchanged except in one detail: a timeout during one of its reads (when
    it has not set a timeout of its own for that read) surfaces as its
    ``ConnectionError`` instead of ``TimeoutError``; both close the connection.
    Where redis-py puts Python's timeout back (a timed read of its own may),
    the next exchange here takes it off again.
    """
    timeout = sock.gettimeout()
    if timeout != state.kernel_timeout:
        seconds = int(timeout)
        value = struct.pack("ll", seconds, int((timeout - seconds) * 1_000_000))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)
        state.kernel_timeout = timeout
    sock.settimeout(None)


def _unpackable(commands: list[tuple[Any, ...]]) -> redis.DataError:
    """The ``DataError`` naming the first argument that is not bytes, str, int or float."""
    for command in commands:
        for value in command:
            if isinstance(value, bool) or not isinstance(value, (bytes, str, int, float)):
                return redis.DataError(f"Invalid input of type {type(value).__name__!r} in {command[0]}: {value!r}. "
                                       "Convert to bytes, str, int or float first.")
    return redis.DataError(f"could not pack {commands!r}")
