"""Whether any fetcher waits on the wake-up lists: pushes write tokens only while one does.

Who needs a token on ``wake:<queue>``: an idle fetcher thread serving several queues
in the polling fallback (``FETCH_NOTIFICATIONS = False``, or a Redis that refuses
``CLIENT TRACKING``), which blocks on those lists. Nobody else reads them: a thread
serving one queue blocks on the queue itself, and with the push watch
(server/push_watch.py) Redis itself tells idle threads about every write to a queue.
So with no fallback fetcher around, the three commands of a push's wake-up
(``LPUSH``/``LTRIM``/``EXPIRE``) are work for nobody, on every push.

How pushers know, without a round trip of their own:

* a fallback fetcher sets :data:`~wurk_django.keys.WAKE_WANTED` (with a time to live,
  :data:`WANTED_TTL`) when one of its threads is about to wait on the lists, and sets
  it again every :data:`REFRESH_EVERY` seconds while its threads keep waiting;
* a pushing process adds ``EXISTS wake-wanted`` to one push's round trip at most every
  :data:`LEARN_EVERY` seconds per Redis client, and leaves the tokens out while the
  last answer was "no" and is younger than that. With no answer yet, or an old one,
  it writes them (and asks again).

The gap, and how it is closed: a fetcher that has just set the marker (it was not
there, or this fetcher has just started) cannot know that every pusher has learnt of it until :data:`LEARN_EVERY` has
passed, counted from the moment the marker was set. Such a push is never more than
``LEARN_EVERY`` late: its "no" was learnt by a round trip sent less than
``LEARN_EVERY`` before it. So for :data:`WINDOW` seconds after its first wait, and after
setting a marker that was absent, the fetcher's threads wait on the lists at most :data:`WINDOW_POLL`
seconds at a time and walk their queues between: a job pushed in that second is
started within about ``WINDOW_POLL``; every later push carries its token and wakes a
thread in milliseconds, as before. (A thread already blocked when the marker came back
after it expired, say after a ``FLUSHDB``, finishes its wait: at most
``FETCH_POLL_INTERVAL``, the fallback's bound for any push without a token.)
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from typing import Any

import redis as redis_lib

from . import keys

logger = logging.getLogger("wurk_django.worker")

#: Seconds a pusher's "no fetcher needs tokens" stays good.
LEARN_EVERY = 1.0
#: Seconds the marker lives unless set again.
WANTED_TTL = 60
#: Seconds between a fallback fetcher's settings of the marker while its threads wait.
REFRESH_EVERY = 20.0
#: Seconds after a fallback fetcher set an absent marker during which its threads
#: wait at most WINDOW_POLL at a time (LEARN_EVERY plus a margin for a push in flight).
WINDOW = LEARN_EVERY + 0.1
WINDOW_POLL = 0.1

class _Known:
    """A pushing client's last answer: whether the marker existed, and when the round trip
    that learnt it was sent (monotonic). Threads race on it harmlessly: each writes a
    complete answer, and an older one only makes a push write its tokens."""

    __slots__ = ("wanted", "sent")

    def __init__(self) -> None:
        self.wanted = True
        self.sent = -1e18


# Client id -> its answer, beside the client rather than on it (redis-py owns the object);
# an entry goes with its client (the weak reference's callback), before the id can be reused.
_answers: dict[int, _Known] = {}
_alive: dict[int, Any] = {}


def known(client: Any) -> _Known:
    """The answer kept for ``client`` (a redis-py client: per process, per Redis; a forked
    child builds its own clients, so it starts with no answer)."""
    key = id(client)
    state = _answers.get(key)
    if state is None:
        state = _Known()
        try:
            _alive[key] = weakref.ref(client, lambda _ref, key=key: (_answers.pop(key, None), _alive.pop(key, None)))
        except TypeError:  # a client class that refuses weak references: kept alive with its answer
            _alive[key] = client
        state = _answers.setdefault(key, state)
    return state


def ask_command() -> tuple[str, str]:
    """The command a push adds to its round trip to learn the answer."""
    return ("EXISTS", keys.WAKE_WANTED)


def learn(state: _Known, reply: Any, sent: float) -> None:
    """Keep the answer to :func:`ask_command`, from a round trip sent at ``sent`` (monotonic)."""
    if isinstance(reply, int):
        state.wanted = reply > 0
        state.sent = sent


class Advertiser:
    """A fallback fetcher's side: keeps the marker set while its threads wait on the
    lists, and says how long a thread may block (short during the window)."""

    def __init__(self, client_for: Any) -> None:
        self._client_for = client_for  # () -> redis client; a fork gets its own
        self._lock = threading.Lock()
        self._next_refresh = 0.0
        self._window_ends = 0.0

    def wait_for(self, poll_interval: float) -> float:
        """Seconds a thread may block on the wake-up lists now; sets the marker when due."""
        now = time.monotonic()
        if now >= self._next_refresh:
            self._refresh(now)
            now = time.monotonic()
        if now < self._window_ends:
            return min(poll_interval, WINDOW_POLL)
        return poll_interval

    def _refresh(self, now: float) -> None:
        with self._lock:
            if now < self._next_refresh:
                return
            if not self._next_refresh:
                # This fetcher's first wait: open the window before the marker is even
                # sent, so no thread of it starts a long wait meanwhile. Opened whatever
                # the marker's state: another fetcher may have set it a moment ago, before
                # the pushers learnt of it.
                self._window_ends = now + WINDOW
            self._next_refresh = now + REFRESH_EVERY
            try:
                before = self._client_for().execute_command("SET", keys.WAKE_WANTED, "1", "EX", WANTED_TTL, "GET")
            except redis_lib.RedisError as exc:
                # Pushers then write tokens as long as they last knew to, then not: the
                # walks every poll interval still find every job. Try again soon.
                self._next_refresh = now + 1.0
                logger.debug("could not set %s: %s", keys.WAKE_WANTED, exc)
                return
            if before is None:
                self._window_ends = time.monotonic() + WINDOW
