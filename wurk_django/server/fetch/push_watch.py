"""Push notifications for idle fetchers: Redis says when any client writes a queue.

Why: an idle thread serving several queues cannot block on all of them with a move
(``BLMOVE`` takes one list), and the wake-up tokens (``wake:<queue>``) are written
by wurk_django's own pushes only. A job pushed by Ruby Sidekiq, or by a bare
``LPUSH``, waited for the next poll, up to ``FETCH_POLL_INTERVAL`` (issue 25).

How: Redis's client-side caching (``CLIENT TRACKING``, Redis 6 and later) in its
opt-in mode, with its messages redirected to the process's subscribed connection
(subscriber.py, shared with the scheduler's wake-ups). A thread about to wait sends, in
one round trip, ``CLIENT TRACKING ON REDIRECT <subscriber> OPTIN``, ``CLIENT CACHING YES``
and ``fetch_and_watch``, on a connection of the ordinary pool in a fetcher of one thread
(so that an idle ``-c 1`` worker holds the subscriber and one pooled connection, nothing
more), and on the watch's own connection, one thread at a time, in a fetcher of several
(each thread arming a pooled connection of its own, one push would send a notice per
connection and wake them all). The script
fetches like any walk and, in the same atomic step, reads each queue, so Redis
remembers those keys for that connection (and for no other command of it: opt-in). The
next write to one of them, by any client, sends one message to the subscriber, which
gives one permit to a waiting thread; that thread runs the script again, fetching and
re-arming at once. Redis forgets a key once it has sent its message, so a queue costs
one message per idle spell of this process, however busy it is; exact keys are
tracked, so a private list's writes never match.

Nothing is polled while idle. A lost subscription (a dropped connection, a Redis
restart, a ``CLIENT KILL``, a failover) and an armed connection closed on either side
(seen by a local look at its socket each second, or when it dials again) reset the
watch: waiting threads wake and walk (a job pushed meanwhile is found) and arm again,
on a connection redirected to the subscriber's new id. Until the subscriber is back,
and for good where Redis refuses ``CLIENT`` (some managed services, Dragonfly), the
fetcher waits on the wake-up lists and polls every ``FETCH_POLL_INTERVAL``, as it did
before.

The cost: every idle process hears a push, so with P idle processes a push costs P
script calls (one per process, not per thread); one of them gets the job.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import redis as redis_lib

from ... import keys
from ...conf import Config
from ...redis import pools, sentinel, wire
from ...redis.connection import borrow, disconnect_quietly, get_redis, give_back, keep_open_first, send_on
from ...redis.scripts import lua
from .. import subscriber

logger = logging.getLogger("wurk_django.worker")

INVALIDATE_CHANNEL = "__redis__:invalidate"
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


def caps_source() -> str:
    """The text of the queue limits' fetch, for the ``EVAL`` after a ``NOSCRIPT``."""
    from ...queue_limits.caps import FETCH

    return FETCH.source


class PushWatch:
    """One fetcher's notifications: tells its waiting threads when a queue was written."""

    def __init__(self, config: Config, on_paused: Callable[[], None] | None = None) -> None:
        self.config = config
        self._on_paused = on_paused
        self._start()
        self._most_permits = max(int(config.concurrency), 1)
        self._stopped = False
        self._paused_key = keys.PAUSED.encode()
        self._looked_at = -1e9  # monotonic time of the last safety look (claim_look)
        self._losses = 0  # walks on a notice in a row that found nothing
        self._refusal_told = False
        # The keys a notice is about that wake a thread: the queues and the paused set.
        # Redis 7.0 tracks every key a script names, the private lists among them, and
        # their acknowledgements would otherwise each wake a thread for nothing.
        self._watched: set[bytes] = {self._paused_key}

    def _start(self) -> None:
        self._cond = threading.Condition()
        self._permits = 0
        # Bumped whenever tracking may have been set up or lost: a waiter armed under
        # another generation must walk (and arm) again.
        self._generation = 0
        self._state = OFF
        self._redirect: int | None = None  # the subscriber's client id, where tracking goes
        self._subscriber: subscriber.Subscriber | None = None
        self._listening: Any = None
        # The connections armed in this generation (their loss ends it), and those that
        # carry this watch's redial hook (redis-py keeps it as a weak reference).
        self._armed: weakref.WeakSet[Any] = weakref.WeakSet()
        self._hooked: weakref.WeakSet[Any] = weakref.WeakSet()
        # A fetcher of several threads arms on one connection of its own, one thread at a
        # time: on pooled connections each thread could arm another, and one push would
        # then send a notice per connection, waking every thread.
        self._reader: Any = None
        self._reader_lock = threading.Lock()
        self._pid = os.getpid()

    # -- state ---------------------------------------------------------------

    def on(self) -> bool:
        """True while notifications flow; the first call subscribes."""
        if self._pid != os.getpid():
            # Forked: the parent's subscriber thread and armed sockets are not ours.
            refused = self._state == REFUSED
            self._start()
            if refused:
                self._state = REFUSED
        if self._subscriber is None and not self._stopped and self._state != REFUSED:
            with self._cond:
                if self._subscriber is None and not self._stopped:
                    self._subscriber = subscriber.for_config(self.config)
            # Outside the lock: a subscription already up reports at once, from here.
            listening = self._subscriber.listen(INVALIDATE_CHANNEL, self._heard, self._changed, self._check_armed)
            if self._state == REFUSED or self._stopped:
                self._subscriber.leave(listening)  # refused in that report (CLIENT ID), or stopped meanwhile
            else:
                self._listening = listening
        return self._state == ON

    def usable(self) -> bool:
        """False once Redis has refused tracking (the fetcher then polls, as before); while
        the watch is being set up again it stays usable, and waits end when it is back."""
        self.on()
        return self._state != REFUSED

    @property
    def generation(self) -> int:
        return self._generation

    def _changed(self, up: bool, client_id: int | None) -> None:
        """The subscription was made (``client_id`` its id, None where ``CLIENT`` is refused)
        or lost: every waiter walks again, and arms on the new redirect."""
        with self._cond:
            if up and client_id is None:
                self._refuse("Redis refused CLIENT ID")
            elif up:
                self._state, self._redirect = ON, client_id
            else:
                if self._state == ON and not self._stopped:
                    logger.info("push watch lost (its subscription ended); polling until it is back")
                if self._state != REFUSED:
                    self._state = OFF
                self._redirect = None
            self._reset()

    def _refuse(self, why: object) -> None:
        # Called holding self._cond.
        self._state, self._redirect = REFUSED, None
        if not self._refusal_told:
            self._refusal_told = True
            logger.warning("Redis refused CLIENT TRACKING (%s): idle threads serving several queues find "
                           "jobs pushed by other clients (Ruby Sidekiq, a bare LPUSH) by polling, every "
                           "FETCH_POLL_INTERVAL (%gs)", why, float(self.config.fetch_poll_interval))
        if self._subscriber is not None and self._listening is not None:
            self._subscriber.leave(self._listening)  # the scheduler may still use the subscription
            self._listening = None

    def _reset(self) -> None:
        # Called holding self._cond.
        self._generation += 1
        self._armed = weakref.WeakSet()
        self._cond.notify_all()  # waiters armed on nothing must walk and arm

    def _lost_armed(self, why: str) -> None:
        with self._cond:
            if self._state == ON:
                logger.debug("push watch: %s; waiting threads arm again", why)
            self._reset()

    def _check_armed(self) -> None:
        """On the subscriber's thread, once a second: an armed connection closed since (by
        the server: a kill, an idle timeout; or here: a trim) no longer carries the watch."""
        reader = self._reader
        if reader is not None and reader in self._armed and self._reader_lock.acquire(blocking=False):
            try:
                # Nothing is ever sent to the reader unasked (its notices go to the
                # subscriber): readable while no thread uses it means closed.
                gone = not wire.maybe_connected(reader) or wire.stale(reader)
                if gone:
                    disconnect_quietly(reader)  # it dials again at the next arming
            finally:
                self._reader_lock.release()
            if gone:
                self._lost_armed("the push watch's connection was closed")
                return
        for conn in list(self._armed):
            if conn is not reader and wire.dropped(conn):
                self._lost_armed("an armed connection was closed")
                return

    def _conn_redialed(self, conn: Any) -> None:
        """redis-py's connect hook on each connection this watch armed: tracking is per session."""
        if conn in self._armed:
            self._lost_armed("an armed connection dialed again")

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._state = OFF if self._state != REFUSED else REFUSED
            self._cond.notify_all()
        listening, self._listening = self._listening, None
        if self._subscriber is not None and listening is not None:
            self._subscriber.leave(listening)
        with self._reader_lock:
            reader, self._reader = self._reader, None
        disconnect_quietly(reader)

    # -- the waiting threads ---------------------------------------------------

    def fetch_and_arm(self, pairs: list[tuple[str, str]], caps: Any = None,
                      names: list[str] | None = None) -> tuple[int, int, bytes | None]:
        """Run ``fetch_and_watch``, tracking redirected to the subscriber: (1-based index
        of the pair fetched from or 0, queues still holding a job, payload). Raises
        RedisError; the watch then walks and arms anew. With ``caps`` (the fetcher's
        :class:`~wurk_django.queue_limits.caps.QueueCaps`, some of ``names`` capped) the
        queue limits' fetch runs instead: it skips a full queue and reads its slot hash,
        so a slot freed anywhere wakes a waiter as a push does."""
        watched = self._watched
        for public, _ in pairs:
            key = public.encode()
            if key not in watched:  # copied, not changed: the subscriber's thread reads it meanwhile
                self._watched = watched = watched | {key}
        redirect, armed = self._redirect, self._armed
        if redirect is None:
            raise redis_lib.ConnectionError("the push watch's subscription is not up")
        if caps is None:
            keys_ = [key for pair in pairs for key in pair]
            keys_.append(keys.PAUSED)  # an unpause must wake the waiters too
            command = FETCH_AND_WATCH.command(keys=keys_, args=[len(pairs)])
            source = FETCH_AND_WATCH.source
        else:
            assert names is not None
            for name in names:
                if caps.capped(name):
                    key = caps.key(name).encode()
                    if key not in watched:
                        self._watched = watched = watched | {key}
            command = caps.fetch_command(pairs, names, arm=True, others=(keys.PAUSED,))
            source = caps_source()
        # One thread: a pooled connection (the heartbeat's too), so that an idle -c 1
        # worker holds no connection for the watch. Several: the watch's own, in turn.
        client = get_redis(config=self.config) if self._most_permits <= 1 else None
        if client is not None:
            conn = borrow(client)
        else:
            self._reader_lock.acquire()
            if self._reader is None:
                self._reader = pools.new_connection(get_redis("watch", pool_size=2, config=self.config).connection_pool)
            conn = self._reader
        try:
            sentinel.follow_primary(conn)  # a moved primary: it dials the new one
            if conn not in self._hooked:
                conn.register_connect_callback(self._conn_redialed)
                self._hooked.add(conn)
            track = ("CLIENT", "TRACKING", "ON", "REDIRECT", redirect, "OPTIN")
            caching = ("CLIENT", "CACHING", "YES")
            replies = send_on(conn, [track, caching, command], raise_errors=False)
            if isinstance(replies[2], redis_lib.exceptions.NoScriptError):
                # CACHING YES covers the next command only: say it again before the EVAL.
                replies[2] = send_on(conn, [caching, ("EVAL", source, *command[2:])])[1]
        finally:
            if client is not None:
                give_back(client, conn)
            else:
                self._reader_lock.release()
        refused = next((r for r in replies[:2] if isinstance(r, redis_lib.ResponseError)), None)
        if refused is not None:
            self._refused_tracking(refused)
            raise refused
        if isinstance(replies[2], Exception):
            raise replies[2]
        if client is not None:
            # The one thread's arming supersedes the last one's, on whichever pooled
            # connection that was: its loss (a trim may close it now) resets nothing.
            for old in list(armed):
                if old is not conn:
                    armed.discard(old)
                    keep_open_first(old, False)
        armed.add(conn)
        keep_open_first(conn)  # connection.trim_idle keeps it open before the others
        reply = replies[2]
        index, queued = int(reply[0]), int(reply[1])
        # The queue limits' fetch says the private list's length before its payload.
        return index, queued, (reply[2 if caps is None else 3] if index else None)

    def _refused_tracking(self, error: redis_lib.ResponseError) -> None:
        if "redirect" in str(error).lower():
            # No client with that id here: the subscription is on a server this connection
            # is not (a failover it has not seen yet) or just ended. It dials again.
            if self._subscriber is not None:
                self._subscriber.redial()
            with self._cond:
                self._reset()
            return
        with self._cond:
            self._refuse(error)
            self._reset()

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

    # -- on the subscriber's thread ------------------------------------------------

    def _heard(self, written: Any) -> None:
        """A tracking message: the keys written (None: a FLUSHDB/FLUSHALL of any database,
        or the tracking table's own eviction)."""
        if written is not None and not self._watched.intersection(written):
            return  # only a private list: its own fetches and acknowledgements
        if written is None or self._paused_key in written:
            if self._on_paused is not None:
                self._on_paused()
        self._give(1)
