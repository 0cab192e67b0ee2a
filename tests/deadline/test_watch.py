"""The watchdog's side of a deadline, in one process (issue 47 item 5): a deadline joins the
run's watch as its hard deadline when nearer than its time limit, is abandoned as the kind
"deadline", and a far or foreign value (1e308, NaN, infinity) stops nothing and raises nothing."""

from __future__ import annotations

import logging
import time

from tests.server.stopping.test_watchdog import _busy, _run, _thread
from wurk_django.server.run.run import HardStop, Phase
from wurk_django.server.stopping.watchdog import Watchdog


def _unwinds() -> None:
    try:
        _busy(30)
    except HardStop:  # the abandonment asks the thread to unwind
        pass


def test_a_deadline_nearer_than_the_time_limit_stops_the_run_as_a_deadline():
    thread, _seen = _thread(_unwinds)
    run = _run(thread, "d1")
    watchdog = Watchdog()
    watchdog.watch(run, None, 60)  # the processor's watch of the time limit comes first
    watchdog.watch_deadline(run, time.time() + 0.3)
    deadline = time.monotonic() + 30
    while not run.manager.abandoned and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run.manager.abandoned == [run] and run.phase is Phase.ABANDONED
    assert [stop.kind for stop in run.stops] == ["deadline"]
    thread.join(30)


def test_a_time_limit_nearer_than_the_deadline_stays_a_hard_limit():
    thread, _seen = _thread(_unwinds)
    run = _run(thread, "d2")
    watchdog = Watchdog()
    watchdog.watch(run, None, 0.3)
    watchdog.watch_deadline(run, time.time() + 3600)
    deadline = time.monotonic() + 30
    while not run.manager.abandoned and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [stop.kind for stop in run.stops] == ["hard"]
    thread.join(30)


def test_far_and_foreign_deadlines_stop_nothing_and_raise_nothing(caplog):
    thread, _seen = _thread(lambda: _busy(2.0))
    run = _run(thread, "d3")
    watchdog = Watchdog()
    with caplog.at_level(logging.DEBUG, logger="wurk_django.worker"):
        for far in (1e308, float("inf"), float("nan"), time.time() + 10 * 86400):
            watchdog.watch_deadline(run, far)
            time.sleep(0.1)
        time.sleep(1.0)
    thread.join(30)
    assert not run.raised and run.phase is Phase.RUNNING and not run.manager.abandoned
    # The worker's logger only: another test's background thread may log elsewhere meanwhile.
    assert [r.getMessage() for r in caplog.records if r.name.startswith("wurk_django.worker")] == []
