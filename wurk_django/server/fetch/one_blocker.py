"""One idle thread per fetcher waits in Redis; the others wait here for their turn.

A fetcher serving one queue blocks on the queue itself (``BLMOVE``), so any push,
from any client, is moved into a private list the moment it lands. Ten idle threads
blocking at once cost Redis ten ``BLMOVE`` calls per poll interval where one does the
same job: Redis hands a pushed job to one blocked client anyway. So one thread
blocks; when it gets a job, it gives a turn to one waiting thread, which walks (the
push may have been a burst) and, finding nothing, blocks in its place. A waiting
thread whose wait ends (every ``QUIET_POLLS`` poll intervals) looks on its own only
when it has something to send with the look (an ACK, its slot's mark); otherwise it
tries for the blocker's place, and waits again if another thread holds it, sending
nothing: that thread takes whatever is pushed to the queue.
"""

from __future__ import annotations

import os
import threading
import time


class OneBlocker:
    def __init__(self, most_turns: int) -> None:
        self._most_turns = max(most_turns, 1)
        self._stopped = False
        self._start()

    def _start(self) -> None:
        self._blocking = threading.Lock()  # held by the thread blocking in Redis
        self._cond = threading.Condition()
        self._turns = 0
        self._pid = os.getpid()

    def try_block(self) -> bool:
        """True if the calling thread is to block in Redis (then call :meth:`unblock`)."""
        if self._pid != os.getpid():
            self._start()  # forked: the parent's blocking thread is not here, its lock may be held
        return self._blocking.acquire(blocking=False)

    def unblock(self, got_job: bool) -> None:
        self._blocking.release()
        if got_job:
            # The blocker goes to work: a waiting thread walks, then blocks in its place.
            with self._cond:
                self._turns = min(self._turns + 1, self._most_turns)
                self._cond.notify()

    def wait(self, timeout: float) -> None:
        """Wait for a turn, at most ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not self._stopped:
                if self._turns > 0:
                    self._turns -= 1
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self._cond.wait(left)

    def stop(self) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
