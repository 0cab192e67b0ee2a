"""The watchdog's pieces in one process (issue 27 item 3): the async-exception adapter, and
the run's phase that keeps a stop from landing in a run that already ended."""

from __future__ import annotations

import threading
import time
import types

from wurk_django.errors import SoftTimeLimitExceeded
from wurk_django.server.run.run import HardStop, Phase, Run
from wurk_django.server.stopping import async_raise
from wurk_django.server.stopping.watchdog import Watch, Watchdog


def _thread(body) -> tuple[threading.Thread, list]:
    seen: list = []
    ready = threading.Event()

    def run() -> None:
        ready.set()
        try:
            body()
            seen.append("returned")
        except SoftTimeLimitExceeded:
            seen.append("raised")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    ready.wait(10)
    return thread, seen


def _busy(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    n = 0
    while time.monotonic() < deadline:
        n += 1


def test_an_exception_raised_into_python_code_lands_and_a_withdrawn_one_never_does():
    assert async_raise.SUPPORTED
    thread, seen = _thread(lambda: _busy(30))
    assert async_raise.raise_in(thread.ident, SoftTimeLimitExceeded)
    thread.join(30)
    assert seen == ["raised"]

    thread, seen = _thread(lambda: (time.sleep(0.3), _busy(0.2)))
    assert async_raise.raise_in(thread.ident, SoftTimeLimitExceeded)
    async_raise.clear(thread.ident)  # withdrawn while the thread sleeps in C
    thread.join(30)
    assert seen == ["returned"]
    assert not async_raise.raise_in(None, SoftTimeLimitExceeded)


class _Manager:
    """What the watchdog asks of a manager: to take an abandoned run."""

    def __init__(self) -> None:
        self.abandoned: list[Run] = []

    def abandon(self, run: Run) -> None:
        self.abandoned.append(run)


def _run(thread: threading.Thread, jid: str) -> Run:
    ctx = types.SimpleNamespace(job={"jid": jid, "class": "X"})
    return Run(ctx, _Manager(), thread, "t", {"jid": jid, "class": "X"})


def test_no_stop_lands_in_a_run_that_ended():
    thread, seen = _thread(lambda: _busy(1.0))
    run = _run(thread, "j1")
    assert run.come_back()  # the run left its running phase already: its thread settles it
    watchdog = Watchdog()
    watchdog._soft(Watch(run, 0.0, None))
    watchdog._abandon(Watch(run, None, 0.0))
    thread.join(30)
    assert seen == ["returned"]
    assert not run.raised and run.phase is Phase.SETTLED and not run.manager.abandoned and not run.stops
    assert watchdog._thread is None  # no watch was ever added: no thread


def test_a_soft_stop_lands_in_the_run_it_was_meant_for():
    thread, seen = _thread(lambda: _busy(30))
    run = _run(thread, "j2")
    Watchdog()._soft(Watch(run, 0.0, None))
    thread.join(30)
    assert seen == ["raised"] and run.raised and run.phase is Phase.STOPPING
    assert [stop.kind for stop in run.stops] == ["soft"]


def test_an_abandoned_run_is_the_watchdogs_and_its_thread_coming_back_changes_nothing():
    def unwinds() -> None:
        try:
            _busy(30)
        except HardStop:
            seen.append("unwound")

    thread, seen = _thread(unwinds)
    run = _run(thread, "j4")
    Watchdog()._abandon(Watch(run, None, 0.0))
    assert run.phase is Phase.ABANDONED and run.manager.abandoned == [run]
    assert not run.come_back()  # the thread is late: it settles nothing
    assert run.claim() and not run.claim()  # one settlement, whoever asks twice
    thread.join(30)
    assert seen == ["unwound", "returned"]  # asked to unwind (HardStop), which it did


def test_what_a_run_holds_is_given_back_once_whoever_comes_first():
    run = _run(threading.current_thread(), "j5")
    given: list[str] = []
    release = run.hold(lambda: given.append("lease"))
    run.give_back_held()  # abandoned: given back now
    release()  # the thread came back later: nothing more
    assert given == ["lease"]


def test_no_limit_value_makes_the_watchdog_thread_raise_issue_43_item_6(caplog):
    """``1e308`` once made the thread's wait raise OverflowError, logged with a traceback
    every second for the life of the process. Every value the watch is handed, the ones
    the processor refuses too, leaves the thread waiting quietly; and a deadline set
    directly that far off (a revoke's grace of 1e308 s) is waited on in bounded steps."""
    import logging

    thread, _seen = _thread(lambda: _busy(2.5))
    run = _run(thread, "j3")
    watchdog = Watchdog()
    with caplog.at_level(logging.DEBUG, logger="wurk_django.worker"):
        for bad in (1e308, float("inf"), float("nan"), 10**400, True, -1, "10"):
            entry = watchdog.watch(run, bad, bad)
            assert entry.soft_at is None and entry.hard_at is None, bad
            time.sleep(0.1)
        far = Watch(run, None, time.monotonic() + 1e308)
        watchdog._add(far)
        time.sleep(1.5)
    thread.join(30)
    assert watchdog._thread is not None and watchdog._thread.is_alive()
    assert not run.raised and run.phase is Phase.RUNNING
    # The watchdog's own logger: a Sentinel watcher left by another test of this process
    # may log beside it (local CI once), which says nothing of the watchdog.
    assert [r.getMessage() for r in caplog.records if r.name == "wurk_django.worker"] == []
