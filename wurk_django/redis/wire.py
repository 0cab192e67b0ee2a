"""The socket fast path, wurk's state per connection, and the one module that reaches
into redis-py's connections (its pools' undocumented parts are :mod:`pools`'s).

The fetch + ACK batch runs once per job, a push once per enqueue, and job code's
``redis_client()`` once per command. Going through ``Connection.send_packed_command``
and ``read_response`` costs about 45 us of Python per batch (host strings for error
messages, health-check and observability hooks, a parser call per reply); packing
with ``hiredis`` and parsing with a ``hiredis.Reader`` kept beside the socket costs
about 7 us for the same bytes on the wire (bench/micro.py). That speed is the
reason this module exists (RUN-706).

It needs things redis-py does not promise: that a connection keeps its socket in
``_sock`` and its reply parser in ``_parser`` (whose ``parse_error`` makes redis-py's
exception classes), that hiredis packs a command into the bytes redis-py would
send, the option names of ``Redis.parse_response``, and libc's ``send`` and ``recv``
through ctypes (where they cannot be had, small writes take ``sendall`` and every
reply is read by the socket's ``recv_into``, like the rest).
Every such reach into a connection is in this file (into a pool: pools.py), so a
redis-py release that moves one of them breaks this file and nothing else
(tests/redis/test_internals_layout.py holds the rule).

What wurk keeps per connection, for this path and for connection.py, is one
:class:`ConnectionState` beside it (:func:`state_of`), never an attribute on
redis-py's object. :func:`enabled` checks
those assumptions once, at first use; when one does not hold it says why in one
WARNING line and the whole process takes redis-py's public calls instead
(``send_packed_command`` / ``read_response``, ``connect``, ``can_read``): slower,
same results. ``WURK["FAST_PATH"] = False`` or the environment variable
``WURK_FAST_PATH=0`` switches the fast path off on purpose (one INFO line); the
test suite runs once that way (.ci/run).

redis-py still owns the connection: it connects (AUTH, SELECT, TLS), and it is
what a failed batch disconnects. :func:`exchange` only talks on the socket between
those points, and only where that is the plain RESP2 stream it expects: under
RESP3 (push messages would interleave) or on a connection class without a
socket, :func:`usable` says no and the caller takes redis-py's own path. TCP, TLS
(``rediss://``: the socket is an ``ssl.SSLSocket``, whose ``sendall``/``recv_into``
carry plaintext) and Unix sockets all qualify; tests/test_wire_transports.py runs
each against its own redis-server. So do Sentinel-managed connections: redis-py's
``SentinelManagedConnection.connect`` (called here when the socket is closed) asks
the sentinels for the primary, and a ``READONLY`` reply, which this path returns
instead of letting redis-py's Sentinel connection turn it into a disconnect, makes
the caller close the connection (``connection.send_on``).

Error replies are turned into redis-py's exception classes by the connection's own
parser (``ReadOnlyError``, ``NoScriptError``...), so callers cannot tell the two
paths apart.
"""

from __future__ import annotations

import errno
import logging
import os
import select
import socket
import struct
import sys
import threading
import weakref
from time import monotonic, perf_counter
from typing import Any

import redis
import redis.client
import redis.connection

try:
    import hiredis
except ImportError:  # redis[hiredis] is a dependency, but a stripped install must still work
    hiredis = None

logger = logging.getLogger("wurk_django.redis")

_BUFFER = 65536
#: The largest command batch :func:`exchange` sends without letting go of the GIL
#: (``hold_gil=True``); a bigger one takes the usual ``sendall``.
HOLD_GIL_MAX = 16384
# Linux's "more data follows" send flag (0 where the platform has none: a plain send then).
_MSG_MORE = getattr(socket, "MSG_MORE", 0)
#: The environment variable that switches the fast path off ("0", "false", "no", "off")
#: or on; it wins over ``WURK["FAST_PATH"]``.
ENV_SWITCH = "WURK_FAST_PATH"

# Linux's struct timeval is two longs; elsewhere the socket keeps Python's own timeout.
_KERNEL_TIMEOUTS = sys.platform.startswith("linux")


def _libc_holding_gil(name: str, buffer_type: str) -> Any:
    """libc's ``name`` (``send`` or ``recv``: fd, buffer, length, flags), called without
    letting go of the GIL (``ctypes.PyDLL``), or None where that cannot be had (not
    Linux, no ctypes, no libc symbol)."""
    if not _KERNEL_TIMEOUTS:
        return None
    try:
        import ctypes

        call = getattr(ctypes.PyDLL(None), name)
    except (ImportError, OSError, AttributeError):
        return None
    call.argtypes = (ctypes.c_int, getattr(ctypes, buffer_type), ctypes.c_size_t, ctypes.c_int)
    call.restype = ctypes.c_ssize_t
    return call


_send = _libc_holding_gil("send", "c_char_p")

# Never wait for room in the socket buffer while holding the GIL, and never die of SIGPIPE.
_SEND_FLAGS = getattr(socket, "MSG_DONTWAIT", 0) | getattr(socket, "MSG_NOSIGNAL", 0)

# -- waiting for a reply by polling the socket (``spin``) ---------------------------------------
#
# A thread that sleeps in recv() until Redis answers pays for being woken: on the
# 2-vCPU VMs we measure on, a round trip to a local Redis took 85-95 us that way and
# 31-40 us when the thread kept asking the socket with non-blocking reads instead, for
# the same CPU time (the wake-up costs the CPU the polling does). So a caller that is
# latency-bound and alone (a push from a web request) may poll for up to ``spin``
# seconds before it sleeps. Where replies come slower than that (Redis across a
# network), polling would only burn CPU: each miss doubles the number of round trips
# on that connection that skip polling (up to SPIN_SKIP_MAX), and one reply that does
# come in time resets it.
#
# A process that runs processor threads never polls (spin_off): every non-blocking
# read lets go of the GIL, and ten threads handing it to each other cost more than the
# wake-ups saved (a drain of jobs making a Redis call ran 5,600 jobs/s with polling,
# 6,500-7,500 without).

_SPIN_FLAGS = getattr(socket, "MSG_DONTWAIT", 0)

#: The most round trips in a row a connection skips polling after replies came too late.
SPIN_SKIP_MAX = 1023
_spin_allowed = bool(_SPIN_FLAGS)


def spin_off() -> None:
    """Never poll for replies in this process (it runs processor threads)."""
    global _spin_allowed
    _spin_allowed = False


def spin_allowed() -> bool:
    """Whether :func:`exchange` may poll for a reply in this process (see :func:`spin_off`)."""
    return _spin_allowed


# -- letting other threads run before reading a reply (``round_trip``) ---------------------------
#
# A thread that writes a command and then waits in recv() sleeps twice per round trip
# when other threads want the GIL: in the kernel until Redis answers, then on the GIL,
# which another thread took meanwhile. Ten worker threads each making one INCR a job
# slept 2.4-2.5 times a job that way. round_trip instead lets go of the GIL right after
# the write (sched_yield, during which the waiting threads take it), and when it has the
# GIL back looks for the reply with a non-blocking recv that keeps the GIL: by then
# Redis has usually answered, and the thread slept once (1.6 times a job, 8 % more jobs
# a second, docs/benchmarks.md). It does so only while other threads of the process are
# running jobs (busy_threads). Where no other thread wanted the GIL even so, the reply is
# not there yet and the look was wasted: each such miss doubles the number of round trips
# on that connection that skip it (up to YIELD_SKIP_MAX), and one hit resets it.

#: The most round trips in a row a connection skips the yield after replies were not there.
YIELD_SKIP_MAX = 1023
#: How many of this process's threads are running jobs now, kept by the worker as its
#: processors start and finish them (wurk_django/server/state.py). round_trip yields only
#: while more than one is: a lone busy thread (``-c 1``, a web request, a quiet worker)
#: has nobody to let run, and a 10,000-job drain at ``-c 1`` measured 3 % fewer jobs a
#: second with the yield than without. A hint: a wrong value costs speed, never a reply.
busy_threads = 0


_recv = _libc_holding_gil("recv", "c_void_p")
_sched_yield = getattr(os, "sched_yield", None)


def _writable_view(buffer: bytearray) -> Any:
    """A ctypes view of ``buffer`` for :data:`_recv` to read into (None without it)."""
    if _recv is None or _sched_yield is None:
        return None
    import ctypes

    return (ctypes.c_char * len(buffer)).from_buffer(buffer)


# -- the decision, made once per process -------------------------------------------------------

_decision_lock = threading.Lock()
#: None until decided; then whether the fast path runs in this process.
_active: bool | None = None
#: Why it does not (None while it does, or before the decision).
_reason: str | None = None
#: redis.client's option names for parse_response (app_redis), found by the check.
NEVER_DECODE: str = "NEVER_DECODE"
EMPTY_RESPONSE: str = "EMPTY_RESPONSE"


def switched_on() -> tuple[bool, str]:
    """Whether the switch allows the fast path, and which switch said so: the
    environment variable when it is set, else ``WURK["FAST_PATH"]`` (default on)."""
    value = os.environ.get(ENV_SWITCH, "").strip()
    if value:
        return value.lower() not in ("0", "false", "no", "off"), f"{ENV_SWITCH}={value}"
    try:
        from django.conf import settings

        wurk = (getattr(settings, "WURK", None) or {}) if settings.configured else {}
        on = wurk.get("FAST_PATH", True) if isinstance(wurk, dict) else True
    except Exception:  # no Django settings (a script driving a Config by hand): the default
        on = True
    return on is not False, 'WURK["FAST_PATH"]'


def assumption_problem() -> str | None:
    """What this module assumes of redis-py and hiredis that no longer holds, in
    words, or None when everything does. Builds a connection object (it never
    connects) and compares; tests/test_wire_contract.py runs it on every redis-py
    version CI installs."""
    if hiredis is None:
        return "hiredis is not installed"
    for name in ("pack_command", "Reader"):
        if not hasattr(hiredis, name):
            return f"hiredis has no {name}"
    for name in ("NEVER_DECODE", "EMPTY_RESPONSE"):
        if not isinstance(getattr(redis.client, name, None), str):
            return f"redis.client has no {name} option name"
    try:
        conn = redis.connection.Connection(protocol=2)
    except Exception as exc:  # whatever it is, redis-py changed shape: say so and take its own path
        return f"redis.connection.Connection(protocol=2) failed: {exc!r}"
    if "_sock" not in vars(conn) or conn._sock is not None:
        return "a new redis-py connection has no _sock attribute set to None"
    for name in ("connect", "disconnect", "encoder", "protocol"):
        if not hasattr(conn, name):
            return f"a redis-py connection has no {name}"
    encoder = conn.encoder
    for name in ("decode_responses", "encoding", "encoding_errors"):
        if not hasattr(encoder, name):
            return f"a redis-py encoder has no {name}"
    parse_error = getattr(getattr(conn, "_parser", None), "parse_error", None)
    if not callable(parse_error):
        return "a redis-py connection has no _parser.parse_error"
    try:
        error = parse_error("NOSCRIPT No matching script")
    except Exception as exc:  # a parser that cannot make an error cannot be lent to hiredis
        return f"_parser.parse_error failed: {exc!r}"
    if not isinstance(error, redis.exceptions.NoScriptError):
        return f"_parser.parse_error made {type(error).__name__}, not NoScriptError"
    sample = ("SET", "k\u00e9y", b"v\x00\r\n", 3, -7, 1.5, 1000000000000000.5, "")
    try:
        ours = hiredis.pack_command(sample)
        theirs = _reference_pack(conn, sample)
    except Exception as exc:  # a packer that refuses plain values is not one to rely on
        return f"packing a command failed: {exc!r}"
    if ours != theirs:
        return f"hiredis packs {ours!r} where redis-py packs {theirs!r}"
    return None


def _reference_pack(conn: Any, command: tuple[Any, ...]) -> bytes:
    """``command`` as redis-py's pure-Python packer writes it (redis-py itself uses
    hiredis's packer when it can, so comparing with that would prove nothing)."""
    serializer = getattr(redis.connection, "PythonRespSerializer", None)
    if serializer is not None:
        return b"".join(serializer(6000, conn.encoder.encode).pack(*command))
    return b"".join(conn.pack_command(*command))


def enabled() -> bool:
    """True when this process uses the fast path: the switch allows it and every
    assumption holds. Decided at the first call, logged once when the answer is no."""
    if _active is None:
        _decide()
    return bool(_active)


def why_not() -> str | None:
    """Why the fast path is off in this process (after :func:`enabled`), or None."""
    enabled()
    return _reason


def _decide() -> None:
    global _active, _reason, NEVER_DECODE, EMPTY_RESPONSE
    with _decision_lock:
        if _active is not None:
            return
        on, switch = switched_on()
        try:
            problem = None if not on else assumption_problem()
        except Exception as exc:  # a check that cannot even run is a failed check, never a crash
            problem = f"checking the fast path's assumptions failed: {exc!r}"
        if not on:
            _reason = f"switched off ({switch})"
            logger.info("Redis fast path %s: every command goes through redis-py's own calls", _reason)
        elif problem is not None:
            _reason = f"redis-py {redis.__version__}: {problem}"
            logger.warning("Redis fast path off, %s; every command goes through redis-py's own calls "
                           "(same results, slower; docs/redis.md, The socket fast path)", _reason)
        else:
            NEVER_DECODE, EMPTY_RESPONSE = redis.client.NEVER_DECODE, redis.client.EMPTY_RESPONSE
            _reason = None
        _active = on and problem is None


def reset() -> None:
    """Forget the decision: the next :func:`enabled` checks again (tests, after
    changing the switch)."""
    global _active, _reason
    with _decision_lock:
        _active, _reason = None, None


# -- per connection ----------------------------------------------------------------------------

def usable(conn: Any) -> bool:
    """True when :func:`exchange` may run on ``conn``: the fast path is on in this
    process and ``conn`` is a connected-or-connectable RESP2 socket connection."""
    if _active is None:
        _decide()
    return bool(_active) and str(getattr(conn, "protocol", 2) or 2) == "2" and hasattr(conn, "_sock") \
        and hasattr(conn, "connect")


def ready(conn: Any) -> bool:
    """Connect ``conn`` unless it already is, then say whether :func:`exchange` may run
    on it (:func:`usable`). Raises what ``connect()`` raises, before anything of a
    command was sent. One call for the per-job path, where every call counts."""
    if _active:
        if getattr(conn, "_sock", True) is None:
            conn.connect()
        return str(getattr(conn, "protocol", 2) or 2) == "2" and hasattr(conn, "_sock") and hasattr(conn, "connect")
    if _active is None:
        _decide()
        return ready(conn)
    conn.connect()  # redis-py's connect() returns at once on a connected socket
    return False


def maybe_connected(conn: Any) -> bool:
    """False when ``conn`` is known not to hold a socket (it dials on its next
    command); True when it does or when that cannot be told."""
    if _active is None:
        _decide()
    if _active:
        return getattr(conn, "_sock", None) is not None
    return getattr(conn, "is_connected", True) is not False  # a property from redis-py 6 on


def stale(conn: Any) -> bool:
    """True when an idle connection was closed by the server or holds bytes nobody
    asked for (what redis-py checks when a pool hands a connection out)."""
    if _active is None:
        _decide()
    if not _active:
        try:
            return bool(conn.can_read(timeout=0))
        except (redis.ConnectionError, redis.TimeoutError, OSError):
            return True
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return False  # not connected: it connects on its next use
    pending = getattr(sock, "pending", None)  # TLS: bytes already decrypted, invisible to poll
    if pending is not None and pending():
        return True
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


def dropped(conn: Any) -> bool:
    """True when ``conn`` is known to have lost its session: closed on this side, or
    closed by the server (end of file waiting on its socket). Safe to call while another
    thread uses ``conn``: it only peeks, and a reply in flight is not end of file.
    False when it cannot be told (TLS, whose bytes cannot be peeked at; redis-py's own
    calls, which expose no socket): the connection's next use finds out then."""
    if not maybe_connected(conn):
        return True
    if not _active:
        return False
    sock = getattr(conn, "_sock", None)
    if sock is None:
        return True
    if getattr(sock, "pending", None) is not None:
        return False  # TLS
    try:
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        if not poller.poll(0):
            return False
        return sock.recv(1, socket.MSG_PEEK | _SPIN_FLAGS) == b""
    except (BlockingIOError, InterruptedError):
        return False
    except (OSError, ValueError):
        return True


def skips_decoding(options: dict[str, Any]) -> bool:
    """True when a command's options ask redis-py not to decode its reply."""
    return NEVER_DECODE in options


def finish_reply(client: Any, name: Any, reply: Any, options: dict[str, Any]) -> Any:
    """A raw reply read by :func:`exchange` for one command of ``client``, made into
    what ``Redis.parse_response`` returns: its error raised (or the command's
    empty-response value), then the command's response callback applied."""
    if isinstance(reply, redis.ResponseError):
        if EMPTY_RESPONSE in options:
            return options[EMPTY_RESPONSE]
        raise reply
    if options:
        options.pop(EMPTY_RESPONSE, None)
        options.pop("keys", None)  # redis-py's client-side cache key list, not an option of the callback
    callbacks = client.response_callbacks
    # redis-py's table is a dict that upper-cases every key it is given, in a Python method
    # per lookup; an upper-case name (what its command methods send) is found by dict's own.
    callback = dict.get(callbacks, name) if type(name) is str and name.isupper() else callbacks.get(name)
    return callback(reply, **options) if callback is not None else reply


# -- the fast path itself ----------------------------------------------------------------------

class ConnectionState:
    """What wurk keeps about one redis-py connection: the wrapper of our own around it.

    It lives beside the connection, in a table keyed by the connection object
    (:func:`state_of`), never as an attribute on it: redis-py owns its objects, and
    the same table serves every connection whoever built its pool (wurk's pools, a
    Sentinel pool, a django-redis pool handed to ``FastRedis``). An entry goes when
    its connection is garbage-collected; a forked child starts with an empty table
    (its parent's sockets are never its to read).

    Two kinds of fields. Those of the socket (the reader, the replies still owed,
    the kernel's timeout, polling counts) describe ``sock``, and are forgotten
    together as soon as the connection holds another socket (:meth:`on_socket`):
    a reconnect loses what the old one owed. Those of the connection (when it was
    last used or set aside, whether the push watch armed it, whether it met
    ``READONLY``) stay across reconnects; their owners are
    :mod:`wurk_django.redis.connection` and :mod:`wurk_django.server.fetch.push_watch`.
    """

    __slots__ = ("sock", "reader", "buffer", "view", "plain", "kernel_timeout", "owed", "spin_skip", "spin_misses",
                 "yield_skip", "yield_misses",
                 "used_at", "set_aside_at", "armed", "demoted", "ref")

    def __init__(self) -> None:
        #: The socket the fields below it describe (None: none yet).
        self.sock: Any = None
        #: The hiredis reader of :func:`exchange` for ``sock`` (None until the fast path reads on it).
        self.reader: Any = None
        self.buffer: bytearray | None = None
        # A plain TCP or Unix socket (not TLS, not a green-thread wrapper) can wait
        # with the kernel's timeout instead of Python's; see _wait_in_kernel.
        self.plain = False
        self.kernel_timeout: float | None = None
        #: Replies to commands written by send_unanswered (or noted by note_owed) on
        #: ``sock``, read (and dropped) before the next round trip's own.
        self.owed = 0
        # Polling for replies (exchange's spin): round trips left that skip it, and how
        # many polls in a row ran out before their reply came (the skip doubles with each).
        self.spin_skip = 0
        self.spin_misses = 0
        # Letting other threads run before reading a reply (round_trip): round trips left
        # that skip it, and how many times in a row the reply was not there after it.
        self.yield_skip = 0
        self.yield_misses = 0
        # A ctypes view of ``buffer`` that libc's recv reads into, holding the GIL.
        self.view: Any = None
        #: When wurk last gave the connection back to an idle stack, or began a
        #: :func:`round_trip` on it (monotonic; 0.0: never).
        self.used_at = 0.0
        #: When it was last set aside in its pool and not taken back since (monotonic), or None.
        self.set_aside_at: float | None = None
        #: Whether the push watch's tracking is armed on it (kept open before the others).
        self.armed = False
        #: Whether it met ``READONLY`` and must dial again before its next command.
        self.demoted = False
        # The weak reference to the connection whose death drops this entry (see state_of).
        self.ref: Any = None

    def on_socket(self, sock: Any) -> None:
        """The connection now holds ``sock``: forget what belonged to the previous socket."""
        self.sock = sock
        self.reader = self.buffer = self.view = None
        self.plain = _KERNEL_TIMEOUTS and type(sock) is socket.socket
        self.kernel_timeout = None
        self.owed = self.spin_skip = self.spin_misses = self.yield_skip = self.yield_misses = 0


# Connection id -> its state. Keyed by id, not by the object (a WeakKeyDictionary costs
# a weak reference per lookup, on a path that looks up once per round trip); the weak
# reference each entry holds drops it when the connection dies, before its id can be reused.
_states: dict[int, ConnectionState] = {}
# The connections whose class refuses weak references, kept alive so their ids stay theirs.
_pinned: dict[int, Any] = {}


def state_of(conn: Any) -> ConnectionState:
    """``conn``'s :class:`ConnectionState`, made on first use."""
    state = _states.get(id(conn))
    return state if state is not None else _new_state(conn)


def _new_state(conn: Any) -> ConnectionState:
    key = id(conn)
    state = _states.get(key)
    if state is None:
        state = ConnectionState()
        try:
            state.ref = weakref.ref(conn, lambda _ref, key=key: _states.pop(key, None))
        except TypeError:  # a connection class with __slots__ and no __weakref__
            _pinned[key] = conn
        state = _states.setdefault(key, state)  # two threads first using one connection: one state
    return state


def known_state(conn: Any) -> ConnectionState | None:
    """``conn``'s :class:`ConnectionState` if it has one yet (None: wurk never used it)."""
    return _states.get(id(conn))


def _forget_states() -> None:
    # A forked child never reads its parent's sockets, nor writes on them.
    _states.clear()
    _pinned.clear()


os.register_at_fork(after_in_child=_forget_states)


def exchange(conn: Any, commands: list[tuple[Any, ...]], hold_gil: bool = False, spin: float = 0.0) -> list[Any]:
    """Send ``commands`` in one write on ``conn``'s socket and return one reply per
    command. Callers ask :func:`usable` first; the contract tests call it directly.

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

    ``spin`` (seconds) polls the socket for the reply that long before sleeping
    in ``recv`` (see the notes above :func:`spin_off`); only on a plain socket, in
    a process that allows it, and not on a connection whose recent replies came
    too late for it.
    """
    sock, state = _socket_state(conn)
    try:
        pack = hiredis.pack_command
        # One command (job code's, a push) is packed without building a list to join.
        data = pack(commands[0]) if len(commands) == 1 else b"".join([pack(command) for command in commands])
    except TypeError:
        raise _unpackable(commands) from None
    reader = state.reader
    owed = state.owed
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
        wanted = len(commands) + owed
        spin_until = 0.0
        if spin and state.plain and _spin_allowed:
            if state.spin_skip:
                state.spin_skip -= 1
            else:
                spin_until = perf_counter() + spin
        while len(replies) < wanted:
            reply = reader.gets()
            if reply is False:
                if spin_until:
                    try:
                        read = sock.recv_into(state.buffer, 0, _SPIN_FLAGS)
                    except BlockingIOError:
                        if perf_counter() >= spin_until:  # too late: sleep in recv, poll less often
                            spin_until = 0.0
                            state.spin_misses = misses = min(state.spin_misses + 1, 10)
                            state.spin_skip = min((1 << misses) - 1, SPIN_SKIP_MAX)
                        continue
                    state.spin_misses = 0
                else:
                    read = sock.recv_into(state.buffer)
                if not read:
                    raise ConnectionResetError("Connection closed by server.")
                reader.feed(state.buffer, 0, read)
                continue
            replies.append(reply)
    except BaseException as exc:
        failure = _failed(conn, state, exc)
        if failure is exc:
            raise
        raise failure from exc
    if owed:
        state.owed = 0
        del replies[:owed]
    return replies


#: What :func:`round_trip` answers for a connection it does not serve (nothing was sent).
NOT_SERVED: Any = object()


def round_trip(conn: Any, command: tuple[Any, ...], fresh_for: float) -> Any:
    """``command``'s raw reply on ``conn`` (an error reply in its place, as :func:`exchange`
    returns it), or :data:`NOT_SERVED` with nothing sent.

    The per-command path of job code's ``redis_client()``: what :func:`exchange`,
    :func:`_socket_state` and the idle stack's checks do across seven calls, in one,
    for the case that holds on nearly every call. It serves only a connection the
    fast path has already set up and used within the last ``fresh_for`` seconds: a
    plain socket whose timeout the kernel keeps (so the write can hold the GIL), with
    no replies owed and a command small enough to write without letting go of the
    GIL. Anything else (a first use, an idle connection that must be checked for a
    server-side close, TLS, a timeout redis-py put back) is the caller's to send the
    full way. Inside a worker, where each job's thread wakes with cold caches, every
    call and attribute lookup left out here is worth about three times what it costs
    in a loop (docs/benchmarks.md). It does not follow a Sentinel primary: callers
    use it only on pools that are not Sentinel-managed.
    """
    sock = getattr(conn, "_sock", None)
    state = _states.get(id(conn))
    if (state is None or sock is None or state.sock is not sock or not state.plain or state.owed
            or state.reader is None or _send is None or not _active or sock.gettimeout() is not None):
        return NOT_SERVED
    now = monotonic()
    if now - state.used_at >= fresh_for:
        return NOT_SERVED
    try:
        data = hiredis.pack_command(command)
    except TypeError:
        raise _unpackable([command]) from None
    size = len(data)
    if size > HOLD_GIL_MAX:
        return NOT_SERVED
    reader = state.reader
    buffer = state.buffer
    try:
        sent = _send(sock.fileno(), data, size, _SEND_FLAGS)
        if sent != size:  # EAGAIN, EINTR, an error (sendall meets it again and raises), or a part
            sock.sendall(data[sent:] if sent > 0 else data)
        if state.yield_skip:
            state.yield_skip -= 1
        elif busy_threads > 1 and state.view is not None:
            # Let the threads waiting for the GIL run while Redis answers, then look for
            # the reply without letting go of the GIL again (see YIELD_SKIP_MAX).
            _sched_yield()
            read = _recv(sock.fileno(), state.view, _BUFFER, _SPIN_FLAGS)
            if read > 0:
                reader.feed(buffer, 0, read)
                state.yield_misses = 0
            else:  # not there yet (or an error, which the read below meets and raises)
                state.yield_misses = misses = min(state.yield_misses + 1, 10)
                state.yield_skip = min((1 << misses) - 1, YIELD_SKIP_MAX)
        reply = reader.gets()
        while reply is False:
            read = sock.recv_into(buffer)
            if not read:
                raise ConnectionResetError("Connection closed by server.")
            reader.feed(buffer, 0, read)
            reply = reader.gets()
    except BaseException as exc:
        failure = _failed(conn, state, exc)
        if failure is exc:
            raise
        raise failure from exc
    state.used_at = now
    return reply


def _failed(conn: Any, state: ConnectionState, exc: BaseException) -> BaseException:
    """What a round trip that failed with ``exc`` raises, after closing ``conn``: a
    half-written or half-read stream cannot be used again. Socket errors become
    redis-py's ``TimeoutError`` or ``ConnectionError``, as on its own path; anything
    else is ``exc`` itself."""
    conn.disconnect()
    if isinstance(exc, TimeoutError):  # socket.timeout
        return redis.TimeoutError(f"Timeout talking to Redis: {exc}")
    if isinstance(exc, OSError):
        if exc.errno in (errno.EAGAIN, errno.EWOULDBLOCK):  # the kernel's timeout ran out
            return redis.TimeoutError(f"Timeout talking to Redis after {state.kernel_timeout}s")
        return redis.ConnectionError(f"Error talking to Redis: {exc}")
    return exc


def _socket_state(conn: Any) -> tuple[Any, ConnectionState]:
    """``conn``'s socket (connecting first if it has none) and the state kept beside it,
    with a reader for that socket."""
    sock = conn._sock
    if sock is None:
        conn.connect()
        sock = conn._sock
    state = _states.get(id(conn)) or _new_state(conn)
    if state.sock is not sock:
        state.on_socket(sock)
    if state.reader is None:
        parser = getattr(conn, "_parser", None)
        parse_error = getattr(parser, "parse_error", None) or redis.ResponseError
        state.reader = _reader(parse_error, getattr(conn, "encoder", None))
        state.buffer = bytearray(_BUFFER)
        state.view = _writable_view(state.buffer)
    return sock, state


def _reader(parse_error: Any, encoder: Any) -> Any:
    if encoder is not None and encoder.decode_responses:
        # The replies a client built with decode_responses=True would give.
        return hiredis.Reader(protocolError=redis.InvalidResponse, replyError=parse_error,
                              encoding=encoder.encoding, errors=encoder.encoding_errors)
    return hiredis.Reader(protocolError=redis.InvalidResponse, replyError=parse_error)


def send_unanswered(conn: Any, commands: list[tuple[Any, ...]], *, more: bool = False) -> None:
    """Write ``commands`` on ``conn``'s socket without waiting for their replies: the
    next :func:`exchange` on ``conn`` reads them first and drops them. For a write whose
    reply nobody needs but which must reach Redis before the caller goes on (the
    kernel has the bytes when this returns, and sends them even if the process is
    killed next). Callers ask :func:`usable` first, and hand ``conn`` to no one else
    before an :func:`exchange` (or :func:`settle`) has read what is owed."""
    sock, state = _socket_state(conn)
    try:
        data = b"".join([hiredis.pack_command(command) for command in commands])
    except TypeError:
        raise _unpackable(commands) from None
    try:
        if state.plain and sock.gettimeout() is not None:
            _wait_in_kernel(state, sock)
        if more and state.plain and _MSG_MORE:
            # The bytes wait in the socket's buffer and leave with the next write that
            # does not say "more" (the next fetch), in one segment: the loopback send and
            # Redis's wake-up are paid once per fetch, not once per job. They are in the
            # kernel all the same: if the process is killed next, closing its socket sends
            # them ahead of the connection's end. Such a write only copies into the buffer,
            # so it keeps the GIL (as exchange does for short writes): letting go of it and
            # taking it back would cost more than the copy.
            sent = _send(sock.fileno(), data, len(data), _SEND_FLAGS | _MSG_MORE) if _send is not None else 0
            if sent != len(data):
                sock.sendall(data[sent:] if sent > 0 else data, _MSG_MORE)
        else:
            sock.sendall(data)
    except OSError as exc:
        conn.disconnect()
        raise redis.ConnectionError(f"Error talking to Redis: {exc}") from exc
    except BaseException:
        conn.disconnect()
        raise
    state.owed += len(commands)


def packed(command: tuple[Any, ...]) -> bytes | None:
    """``command`` in the bytes :func:`exchange` would write for it; None without hiredis
    (where the fast path never serves a connection either)."""
    return hiredis.pack_command(command) if hiredis is not None else None


def send_packed_unanswered(conn: Any, data: bytes) -> bool:
    """Write ``data`` (one command, packed already) on ``conn``'s socket as "more
    follows", without waiting for its reply, as :func:`send_unanswered` does; False
    (nothing sent) unless ``conn`` is a plain socket the fast path set up and already
    used (an :func:`exchange` ran on it), which then :func:`send_unanswered` serves.

    The per-job write of a worker's "running" marker: no packing, no connect check and
    no timeout switch, since its caller's fetch has just done all three on ``conn``.
    What is left is one ``send`` into the socket buffer, holding the GIL."""
    sock = getattr(conn, "_sock", None)
    state = _states.get(id(conn))
    if (sock is None or state is None or state.sock is not sock or not state.plain or _send is None
            or not _MSG_MORE or sock.gettimeout() is not None):
        return False
    try:
        sent = _send(sock.fileno(), data, len(data), _SEND_FLAGS | _MSG_MORE)
        if sent != len(data):
            sock.sendall(data[sent:] if sent > 0 else data, _MSG_MORE)
    except OSError as exc:
        conn.disconnect()
        raise redis.ConnectionError(f"Error talking to Redis: {exc}") from exc
    except BaseException:
        conn.disconnect()
        raise
    state.owed += 1
    return True


def owes(conn: Any) -> bool:
    """Whether replies written by :func:`send_unanswered` (or noted by :func:`note_owed`)
    on ``conn`` are still unread."""
    state = _states.get(id(conn))
    return state is not None and state.owed > 0 and state.sock is not None \
        and state.sock is getattr(conn, "_sock", None)


def can_owe(conn: Any) -> bool:
    """Whether redis-py's own path on ``conn`` can leave replies unread for later: only on a
    connected socket, whose replacement (a reconnect) tells that they are gone."""
    return getattr(conn, "_sock", None) is not None


def note_owed(conn: Any, count: int) -> None:
    """redis-py's path wrote ``count`` commands on ``conn`` whose replies are read later."""
    state = state_of(conn)
    sock = conn._sock
    if state.sock is not sock:
        state.on_socket(sock)
    state.owed += count


def take_owed(conn: Any) -> int:
    """How many replies redis-py's path must read (and drop) first on ``conn``: none when
    the socket they were owed on is gone."""
    state = _states.get(id(conn))
    if state is None or not state.owed:
        return 0
    owed, state.owed = state.owed, 0
    return owed if state.sock is not None and state.sock is getattr(conn, "_sock", None) else 0


def _wait_in_kernel(state: ConnectionState, sock: socket.socket) -> None:
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
