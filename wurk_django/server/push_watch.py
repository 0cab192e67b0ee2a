"""Push notifications for idle fetchers: Redis says when any client writes a queue.

Why: an idle thread serving several queues cannot block on all of them with a move
(``BLMOVE`` takes one list), and the wake-up tokens (``wake:<queue>``) are written
by wurk_django's own pushes only. A job pushed by Ruby Sidekiq, or by a bare
``LPUSH``, waited for the next poll, up to ``FETCH_POLL_INTERVAL`` (issue 25).

How: Redis's client-side caching (``CLIENT TRACKING``, Redis 6 and later), in its
default mode. Each fetcher keeps two connections of its own: a listener subscribed
to ``__redis__:invalidate``, and a reader whose tracking messages are redirected to
it. A thread about to wait runs ``fetch_and_watch`` on the reader: the script
fetches like any walk and, in the same atomic step, reads each queue, so Redis
remembers those keys for the reader. The next write to one of them, by any client,
sends one message to the listener, which gives one permit to a waiting thread; that
thread runs the script again, fetching and re-arming at once. Redis forgets a key
once it has sent its message, so a queue costs one message per idle spell of this
process, however busy it is; exact keys are tracked, so a private list's writes
never match.

Nothing is polled while idle: the listener looks at its two sockets locally once a
second (no command). A dropped connection, a Redis restart or a ``CLIENT KILL`` of
either connection resets the watch: waiting threads wake and walk (a job pushed
meanwhile is found), the watch dials again and tracking is set up anew. Until it is
back, and for good where Redis refuses ``CLIENT TRACKING`` (some managed services,
Dragonfly), the fetcher waits on the wake-up lists and polls every
``FETCH_POLL_INTERVAL``, as it did before.

The cost: every idle process hears a push, so with P idle processes a push costs P
script calls (one per process, not per thread); one of them gets the job.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import redis as redis_lib

from .. import keys, sentinel
from ..conf import Config
from ..connection import get_redis
from ..scripts import lua
from .threads import spawn

logger = logging.getLogger("wurk_django.worker")

INVALIDATE_CHANNEL = "__redis__:invalidate"
#: Seconds between the listener's local looks at its sockets (no Redis command).
LISTEN_TICK = 1.0
#: Seconds between two attempts to set the watch up again after it was lost.
RETRY_SECONDS = 1.0
#: A process whose last walks on a notice found nothing (another process took the job)
#: waits this much per such walk, up to ``MOST_LOSS_PAUSE``, before its next one: every
#: idle process hears every push, and without it each would walk once per push.
LOSS_PAUSE = 0.005
MOST_LOSS_PAUSE = 0.1
#: With the watch on, an idle thread still walks its queues every this many
#: ``FETCH_POLL_INTERVAL``s: a safety net, not how jobs are found.
QUIET_POLLS = 15
FETCH_AND_WATCH = lua("fetch_and_watch")

ON, OFF, REFUSED = "on", "off", "refused"


class _Redialed(redis_lib.ConnectionError):
    """A watch connection dialed again on its own: its tracking or subscription is gone."""


class PushWatch:
    """One fetcher's notifications: tells its waiting threads when a queue was written."""

    def __init__(self, config: Config, on_paused: Callable[[], None] | None = None) -> None:
        self.config = config
        self._on_paused = on_paused
        self._cond = threading.Condition()
        self._permits = 0
        self._most_permits = max(int(config.concurrency), 1)
        # Bumped whenever tracking is set up or lost: a waiter armed under another
        # generation must walk (and arm) again.
        self._generation = 0
        self._state: str | None = None  # None: not tried yet
        self._reader: Any = None
        self._listener: Any = None
        self._reader_lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._pid = os.getpid()
        self._paused_key = keys.PAUSED.encode()
        self._looked_at = -1e9  # monotonic time of the last safety look (claim_look)
        self._losses = 0  # walks on a notice in a row that found nothing
        # The keys a notice is about that wake a thread: the queues and the paused set.
        # Redis 7.0 tracks every key a script names, the private lists among them, and
        # their acknowledgements would otherwise each wake a thread for nothing.
        self._watched: set[bytes] = {self._paused_key}

    # -- state ---------------------------------------------------------------

    def on(self) -> bool:
        """True while notifications flow; the first call sets the watch up."""
        if self._pid != os.getpid():
            self._forked()
        if self._state is None:
            with self._cond:
                if self._state is None and not self._stopped:
                    self._state = OFF
                    self._set_up()
                    self._thread = spawn("push-watch", self._listen)
        return self._state == ON

    def usable(self) -> bool:
        """False once Redis has refused tracking (the fetcher then polls, as before); while
        the watch is being set up again it stays usable, and waits end when it is back."""
        self.on()
        return self._state != REFUSED

    @property
    def generation(self) -> int:
        return self._generation

    def _forked(self) -> None:
        # The parent's sockets and thread are not ours: start afresh, without closing them.
        self._cond = threading.Condition()
        self._reader_lock = threading.Lock()
        self._reader = self._listener = self._thread = None
        self._state = None if self._state != REFUSED else REFUSED
        self._permits = 0
        self._pid = os.getpid()

    def _set_up(self) -> None:
        """Dial the listener and the reader and switch tracking on; the state says how it went."""
        pool = get_redis("watch", pool_size=2, config=self.config).connection_pool
        listener = pool.make_connection()
        reader = pool.make_connection()
        try:
            listener.connect()
            reader.connect()
            listener.send_command("CLIENT", "ID")
            listener_id = listener.read_response()
            reader.send_command("CLIENT", "TRACKING", "ON", "REDIRECT", listener_id, "NOLOOP")
            reader.read_response()
            listener.send_command("SUBSCRIBE", INVALIDATE_CHANNEL)
            listener.read_response()
        except redis_lib.ResponseError as exc:
            _close(listener, reader)
            self._state = REFUSED
            logger.warning("Redis refused CLIENT TRACKING (%s): idle threads serving several queues find "
                           "jobs pushed by other clients (Ruby Sidekiq, a bare LPUSH) by polling, every "
                           "FETCH_POLL_INTERVAL (%gs)", exc, float(self.config.fetch_poll_interval))
            return
        except (redis_lib.RedisError, OSError) as exc:
            _close(listener, reader)
            logger.debug("push watch: could not set up (%s); polling until it can", exc)
            return
        # From now on a connection that dials again has lost what was set up on it.
        listener.register_connect_callback(self._redialed)
        reader.register_connect_callback(self._redialed)
        with self._reader_lock:
            self._listener, self._reader = listener, reader
        with self._cond:
            self._state = ON
            self._generation += 1
            self._cond.notify_all()  # waiters armed on nothing must walk and arm

    def _redialed(self, conn: Any) -> None:
        raise _Redialed("a push watch connection dialed again")

    def _lose(self, why: object) -> None:
        """Drop both connections; every waiter walks again, and the listener sets up anew."""
        with self._reader_lock:
            listener, reader = self._listener, self._reader
            self._listener = self._reader = None
        if listener is None and reader is None:
            return
        _close(listener, reader)
        with self._cond:
            if self._state == ON:
                self._state = OFF
                if not self._stopped:
                    logger.info("push watch lost (%s); polling until it is back", why)
            self._generation += 1
            self._cond.notify_all()

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        self._lose("stopping")

    # -- the waiting threads ---------------------------------------------------

    def fetch_and_arm(self, pairs: list[tuple[str, str]]) -> tuple[int, int, bytes | None]:
        """Run ``fetch_and_watch`` on the reader: (1-based index of the pair fetched from or
        0, queues still holding a job, payload). Raises RedisError, the watch then lost."""
        keys_ = [key for pair in pairs for key in pair]
        keys_.append(keys.PAUSED)  # an unpause must wake the waiters too
        watched = self._watched
        for public, _ in pairs:
            key = public.encode()
            if key not in watched:  # copied, not changed: the listener reads it meanwhile
                self._watched = watched = watched | {key}
        command = FETCH_AND_WATCH.command(keys=keys_, args=[len(pairs)])
        failure: BaseException | None = None
        with self._reader_lock:
            reader = self._reader
            if reader is None:
                raise redis_lib.ConnectionError("push watch is not set up")
            try:
                sentinel.follow_primary(reader)  # a moved primary: it raises _Redialed below
                reply = _run(reader, command)
            except BaseException as exc:
                failure = exc
        if failure is not None:
            self._lose(failure)
            raise failure
        index, queued = int(reply[0]), int(reply[1])
        return index, queued, (reply[2] if index else None)

    def wait(self, generation: int, timeout: float, done: threading.Event) -> bool:
        """Wait for a permit (a watched key was written): True when one was taken; False
        at a new generation, when stopping or after ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                if self._permits > 0:
                    self._permits -= 1
                    return True
                if self._generation != generation or self._stopped or done.is_set():
                    return False
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)

    def claim_look(self, interval: float) -> bool:
        """True for the first waiter per ``interval`` to ask: its turn to walk on its own."""
        with self._cond:
            now = time.monotonic()
            if now - self._looked_at < interval * 0.9:
                return False
            self._looked_at = now
            return True

    def loss_pause(self) -> float:
        """Seconds to wait before walking on a notice: 0 unless this process's last walks
        on notices found nothing. Then another process is taking the jobs and hears the
        pushes too, so this one may look a little later: at high push rates an idle
        process walks at most 1 / ``MOST_LOSS_PAUSE`` times a second, not once per push."""
        return min(LOSS_PAUSE * self._losses, MOST_LOSS_PAUSE)

    def walked(self, found: bool) -> None:
        """Count a walk on a notice: found a job, or not."""
        self._losses = 0 if found else self._losses + 1

    def pause(self, seconds: float, generation: int, done: threading.Event) -> None:
        """Sleep ``seconds`` unless stopping or the watch changes meanwhile."""
        deadline = time.monotonic() + seconds
        with self._cond:
            while not (self._stopped or done.is_set() or self._generation != generation):
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    def pass_on(self) -> None:
        """A thread fetched a job and its queues hold more: wake one more waiter."""
        self._give(1)

    def _give(self, permits: int) -> None:
        with self._cond:
            self._permits = min(self._permits + permits, self._most_permits)
            self._cond.notify(permits)

    # -- the listener thread -------------------------------------------------------

    def _listen(self) -> None:
        while not self._stopped:
            if self._state == REFUSED:
                return
            if self._state != ON:
                time.sleep(RETRY_SECONDS)
                if not self._stopped and self._state == OFF:
                    self._set_up()
                continue
            try:
                self._hear()
            except Exception as exc:
                self._lose(exc)

    def _hear(self) -> None:
        listener = self._listener
        if listener is None:
            return
        # A subscribed connection sends no command: after a Sentinel failover it would
        # stay on the demoted primary. Dropped here, it raises _Redialed on the next read.
        sentinel.follow_primary(listener)
        if listener.can_read(timeout=LISTEN_TICK):
            self._heard(listener.read_response())
        with self._reader_lock:
            reader = self._reader
            # Nothing is ever sent to the reader unasked: readable means closed (a CLIENT
            # KILL, a restart), and with it went its tracking.
            if reader is not None and reader.can_read(timeout=0):
                raise redis_lib.ConnectionError("the push watch's reader was closed by the server")

    def _heard(self, message: Any) -> None:
        if not isinstance(message, list) or len(message) < 3 or message[0] != b"message":
            return
        written = message[2]
        # None: a FLUSHDB/FLUSHALL (of any database) or the tracking table's own eviction.
        if written is not None and not self._watched.intersection(written):
            return  # only a private list: its own fetches and acknowledgements
        if written is None or self._paused_key in written:
            if self._on_paused is not None:
                self._on_paused()
        self._give(1)


def _run(conn: Any, command: tuple[Any, ...]) -> Any:
    """Send one EVALSHA on ``conn``; on NOSCRIPT (it did not run) send it again as EVAL."""
    conn.send_command(*command)
    try:
        return conn.read_response()
    except redis_lib.exceptions.NoScriptError:
        conn.send_command("EVAL", FETCH_AND_WATCH.source, *command[2:])
        return conn.read_response()


def _close(*conns: Any) -> None:
    for conn in conns:
        if conn is None:
            continue
        try:
            conn.disconnect()
        except Exception:  # a broken socket may fail to close; it is dropped anyway
            pass
