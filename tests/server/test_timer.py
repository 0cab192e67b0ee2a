"""TimerLoop (server/timer.py): the first wait, and a terminate that wakes a sleeper."""

from __future__ import annotations

import threading

from wurk_django.server.timer import TimerLoop


def test_a_loop_waits_its_first_wait_and_terminate_wakes_it_at_once():
    """RUN-102: a loop given a first wait does not tick before it, and ``terminate()`` wakes
    the sleeping thread through the condition its wait uses: the thread ends long before
    its 60 s wait would have (``first_wait`` is per loop: the heartbeat's is 0, since a
    process beats as it starts)."""
    ticks = []
    loop = TimerLoop("test-timer", lambda: ticks.append(1), lambda: 60.0, first_wait=60.0)
    loop.start()
    assert loop.join(timeout=0.2) is False  # asleep in its first wait
    loop.terminate()
    assert loop.join(timeout=10) is True
    assert ticks == []


def test_a_loop_without_a_first_wait_ticks_at_once_and_a_wake_is_never_lost():
    """RUN-102: ``first_wait=0`` ticks at once; a ``wake()`` that comes while a tick runs
    is kept, so the next wait returns at once instead of sleeping a whole interval."""
    started, release, second = threading.Event(), threading.Event(), threading.Event()
    ticks = []

    def tick():
        ticks.append(1)
        if len(ticks) == 1:
            started.set()
            release.wait(10)
        else:
            second.set()

    loop = TimerLoop("test-timer-wake", tick, lambda: 60.0)
    loop.start()
    try:
        assert started.wait(10)
        loop.wake()  # during the first tick
        release.set()
        assert second.wait(10)  # not 60 s later
    finally:
        loop.stop()
