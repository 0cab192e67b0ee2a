"""The watchdog's pieces in one process (issue 27 item 3): the async-exception adapter, and
the phase lock that keeps a stop from landing in a run that already ended."""

from __future__ import annotations

import threading
import time
import types

from wurk_django.errors import SoftTimeLimitExceeded
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


def _processor(thread: threading.Thread, running) -> types.SimpleNamespace:
    return types.SimpleNamespace(phase_lock=threading.Lock(), running=running, raised=False, thread=thread,
                                 abandoned=False, done=False)


def test_no_stop_lands_in_a_run_that_ended():
    thread, seen = _thread(lambda: _busy(1.0))
    ctx = types.SimpleNamespace(job={"jid": "j1", "class": "X"})
    processor = _processor(thread, running=None)  # the run left its running phase already
    watchdog = Watchdog()
    watchdog._soft(Watch(processor, ctx, 0.0, None))
    watchdog._abandon(Watch(processor, ctx, None, 0.0))
    thread.join(30)
    assert seen == ["returned"]
    assert not processor.raised and not processor.abandoned and not watchdog._pending
    assert watchdog._thread is None  # no watch was ever added: no thread


def test_a_soft_stop_lands_in_the_run_it_was_meant_for():
    thread, seen = _thread(lambda: _busy(30))
    ctx = types.SimpleNamespace(job={"jid": "j2", "class": "X"})
    processor = _processor(thread, running=ctx)
    Watchdog()._soft(Watch(processor, ctx, 0.0, None))
    thread.join(30)
    assert seen == ["raised"] and processor.raised


def test_no_limit_value_makes_the_watchdog_thread_raise_issue_43_item_6(caplog):
    """``1e308`` once made the thread's wait raise OverflowError, logged with a traceback
    every second for the life of the process. Every value the watch is handed, the ones
    the processor refuses too, leaves the thread waiting quietly; and a deadline set
    directly that far off (a revoke's grace of 1e308 s) is waited on in bounded steps."""
    import logging

    thread, _seen = _thread(lambda: _busy(2.5))
    ctx = types.SimpleNamespace(job={"jid": "j3", "class": "X"})
    class Hashable(types.SimpleNamespace):
        __hash__ = object.__hash__  # the watchdog keys its watches by processor

    processor = Hashable(**vars(_processor(thread, running=ctx)))
    watchdog = Watchdog()
    with caplog.at_level(logging.DEBUG, logger="wurk_django.worker"):
        for bad in (1e308, float("inf"), float("nan"), 10**400, True, -1, "10"):
            entry = watchdog.watch(processor, ctx, bad, bad)
            assert entry.soft_at is None and entry.hard_at is None, bad
            time.sleep(0.1)
        far = Watch(processor, ctx, None, time.monotonic() + 1e308)
        watchdog._add(far)
        time.sleep(1.5)
    thread.join(30)
    assert watchdog._thread is not None and watchdog._thread.is_alive()
    assert not processor.raised and not processor.abandoned
    assert [r.getMessage() for r in caplog.records] == []
