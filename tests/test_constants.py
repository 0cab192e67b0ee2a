"""The constants Sidekiq's behaviour is tuned by, in one place, each read from the module
that uses it (so a change to one of them fails here, with the value the spec gives)."""

from __future__ import annotations

import importlib


def test_the_constants_are_those_of_the_specification():
    """CORE-242: beat 10 s; heartbeat, work-hash and signal TTL 60 s; the blocking fetch
    2 s; fetch back-off 1 s; poller first wait 10 s + 0-5 s; cleanup lock 60 s; day stats
    5 x 365 d; drain poll 0.5 s (0.1 s on a TTY); post-kill wait 3 s; message cap 10,000
    characters; iterable flush 5 s and state 30 d; metrics 8 h / 3 d / 8 h; profile 1 d;
    marks 90 d; API page 50; UI page 25 (Busy 100); history up to 1,825 d (UI 180);
    metrics up to 480 minutes / 72 hours."""
    from wurk_django import errors, iterable, processes
    from wurk_django.admin import busy, common, dashboard
    from wurk_django.api import _base, deploy, stats
    from wurk_django.api import process as api_process
    from wurk_django.conf import Config
    from wurk_django.metrics import query, tracker
    profile_store = importlib.import_module("wurk_django.profiling.store")  # the package exports a store()
    from wurk_django.server import heartbeat, scheduler
    from wurk_django.server.fetch import reliable
    from wurk_django.server.run import manager

    day = 24 * 3600
    assert (heartbeat.BEAT_INTERVAL, heartbeat.TTL, api_process.SIGNAL_TTL) == (10, 60, 60)
    assert Config({}).fetch_poll_interval == 2 and reliable.ERROR_BACKOFF == 1.0
    assert scheduler.INITIAL_WAIT == 10 and processes.CLEANUP_LOCK_TTL == 60
    assert heartbeat.DAY_STATS_TTL == 5 * 365 * day
    assert manager.PAUSE_TIME in (0.5, 0.1) and manager.HARD_SHUTDOWN_WAIT == 3.0
    assert errors.MESSAGE_LIMIT == 10_000
    assert (iterable.FLUSH_INTERVAL, iterable.STATE_TTL) == (5.0, 30 * day)
    assert (tracker.MINUTE_TTL, tracker.TEN_MINUTE_TTL, tracker.HISTOGRAM_TTL) == (8 * 3600, 3 * day, 8 * 3600)
    assert profile_store.EXPIRY == day and deploy.MARKS_TTL == 90 * day
    assert (_base.PAGE_SIZE, common.DEFAULT_COUNT, busy.BUSY_COUNT) == (50, 25, 100)
    assert (stats.MAX_HISTORY_DAYS, dashboard.MAX_HISTORY_DAYS) == (1825, 180)
    assert (query.MAX_MINUTES, query.MAX_HOURS) == (480, 72)


def test_the_poller_first_waits_ten_seconds_and_up_to_five_more():
    """CORE-242: the scheduled-set poller's first wait is 10 s plus a random 0-5 s."""
    from wurk_django.conf import Config
    from wurk_django.server.scheduler import Scheduler

    waits = [Scheduler(Config({})).loop._first_wait for _ in range(20)]
    assert all(10 <= wait < 15 for wait in waits) and len(set(waits)) > 1
