"""Process signals for a standalone worker, through a self-pipe (RUN-301, RUN-820).

Handlers only write one byte to a non-blocking pipe; the main thread reads it
and acts. Nothing in a handler takes a lock or logs, because the interrupted
main thread may already hold that lock.
"""

from __future__ import annotations

import os
import select
import signal

NAMES = {signal.SIGTERM: "TERM", signal.SIGINT: "INT", signal.SIGTSTP: "TSTP", signal.SIGTTIN: "TTIN",
         signal.SIGUSR1: "USR1", signal.SIGUSR2: "USR2"}
if hasattr(signal, "SIGINFO"):  # BSD and macOS: Ctrl-T asks for the thread dump too (RUN-821)
    NAMES[signal.SIGINFO] = "TTIN"
_CODES = {name: bytes([sig]) for sig, name in NAMES.items()}


class SignalPipe:
    def __init__(self) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._r, False)
        os.set_blocking(self._w, False)
        self._previous: dict[int, object] = {}

    def _handler(self, signum: int, frame: object) -> None:
        try:
            os.write(self._w, bytes([signum]))
        except (BlockingIOError, OSError):
            pass  # pipe full: the same signal is already waiting

    def install(self) -> None:
        for sig in NAMES:
            self._previous[sig] = signal.signal(sig, self._handler)

    def restore(self) -> None:
        for sig, previous in self._previous.items():
            signal.signal(sig, previous)  # type: ignore[arg-type]

    def wait(self, timeout: float | None) -> list[str]:
        """Signal names received, waiting up to ``timeout`` seconds for the first."""
        ready, _, _ = select.select([self._r], [], [], timeout)
        if not ready:
            return []
        try:
            data = os.read(self._r, 64)
        except BlockingIOError:
            return []
        return [NAMES.get(signal.Signals(b), str(b)) for b in data if b in NAMES]

    def wake(self) -> None:
        """End a :meth:`wait` now with no signal (a byte that names none)."""
        try:
            os.write(self._w, b"\0")
        except (BlockingIOError, OSError):
            pass  # the pipe is full: the waiter wakes anyway

    def send_self(self, name: str) -> None:
        """Re-deliver a dashboard signal so it takes the normal path (RUN-304)."""
        for sig, sig_name in NAMES.items():
            if sig_name == name:
                os.kill(os.getpid(), sig)
                return
