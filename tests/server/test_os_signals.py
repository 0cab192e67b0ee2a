"""The self-pipe signal handlers (RUN-301): a handler writes the signal's number and
nothing else; a full or closed pipe never raises out of it."""

from __future__ import annotations

import os
import signal

from wurk_django.server.os_signals import SignalPipe


def test_run_301_handlers_only_write_to_a_non_blocking_pipe_that_may_be_full_or_closed():
    """RUN-301: a delivered signal reaches the reader as its name; the handler writes to a
    non-blocking pipe, so a full pipe drops the duplicate instead of blocking the
    interrupted thread, and a closed one is ignored; ``restore`` puts the previous
    handlers back."""
    before = signal.getsignal(signal.SIGUSR2)
    pipe = SignalPipe()
    pipe.install()
    try:
        assert signal.getsignal(signal.SIGUSR2) == pipe._handler
        os.kill(os.getpid(), signal.SIGUSR2)
        os.kill(os.getpid(), signal.SIGTTIN)
        assert pipe.wait(5) == ["USR2", "TTIN"]
        assert pipe.wait(0) == []
        assert not os.get_blocking(pipe._w)
        written = 0
        try:
            while True:
                written += os.write(pipe._w, b"\0" * 4096)
        except BlockingIOError:
            pass
        assert written > 0
        pipe._handler(signal.SIGUSR2, None)  # full: dropped, no exception, no wait
        os.close(pipe._w)
        pipe._handler(signal.SIGUSR2, None)  # closed: ignored
    finally:
        pipe.restore()
        os.close(pipe._r)
    assert signal.getsignal(signal.SIGUSR2) == before
