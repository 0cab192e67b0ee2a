"""TimerLoop: a periodic task on its own thread that stops promptly (RUN-102, RUN-103)."""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable

from .outage import OutageLog, is_outage
from .threads import spawn

logger = logging.getLogger("wurk_django.worker")

JOIN_TIMEOUT = 5.0


def off_the_beat(interval: float) -> float:
    """A first wait for periodic work: ``interval`` plus a random 5-50 % of the beat (of
    ``interval`` itself, if shorter). Work whose period is a multiple of the heartbeat's
    (the reaper's minute, the history rollup's) would otherwise run with a beat every
    time; both then keep their period, so they stay apart for good. Two threads using
    an idle worker's main pool at once make it open a second connection, kept until the
    next beat's trim."""
    from .heartbeat import BEAT_INTERVAL  # here: the heartbeat's module imports much more

    return interval + random.uniform(0.05, 0.5) * min(interval, BEAT_INTERVAL)


class TimerLoop:
    """Call ``tick`` every ``interval()`` seconds until terminated.

    ``first_wait`` is waited before the first tick (0 ticks at once). The wait
    and the done flag share one condition, so ``terminate()`` never misses a
    sleeper. A tick that raises is logged and the loop carries on.
    """

    def __init__(self, name: str, tick: Callable[[], None], interval: Callable[[], float],
                 first_wait: float = 0.0) -> None:
        self.name = name
        self._tick = tick
        self._interval = interval
        self._first_wait = first_wait
        self._cond = threading.Condition()
        self._done = False
        self._woken = False
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.outage = OutageLog(name, "; will try again")

    @property
    def done(self) -> bool:
        return self._done

    def start(self) -> threading.Thread:
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._done = False
                self._thread = spawn(self.name, self._run)
            return self._thread

    def _wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; False once terminated."""
        with self._cond:
            if not self._done and seconds > 0 and not self._woken:
                self._cond.wait(seconds)
            self._woken = False
            return not self._done

    def _run(self) -> None:
        if not self._wait(self._first_wait):
            return
        while True:
            try:
                self._tick()
            except Exception as exc:
                if is_outage(exc):
                    self.outage.failed(exc)  # one line per outage, no traceback (CORE-108)
                else:
                    logger.exception("%s failed; will try again", self.name)
            else:
                self.outage.succeeded()
            if not self._wait(self._interval()):
                return

    def wake(self) -> None:
        """Tick now rather than at the end of the current wait. A wake that comes while
        a tick runs is kept: the next wait returns at once."""
        with self._cond:
            self._woken = True
            self._cond.notify_all()

    def terminate(self) -> None:
        with self._cond:
            self._done = True
            self._cond.notify_all()

    def join(self, timeout: float | None = JOIN_TIMEOUT) -> bool:
        """Wait for the thread; True if it ended. A straggler is kept, never twinned."""
        thread = self._thread
        if thread is None or thread is threading.current_thread():
            return True
        thread.join(timeout)
        return not thread.is_alive()

    def stop(self, timeout: float | None = JOIN_TIMEOUT) -> bool:
        self.terminate()
        return self.join(timeout)
