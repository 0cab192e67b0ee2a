"""``wurk_quiet --wait`` returns as soon as the worker is quiet (issue 28 item 10)."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from tests.support import wait_for
from wurk_django import keys
from wurk_django.api import ProcessSet
from wurk_django.server.heartbeat import BEAT_INTERVAL

pytestmark = pytest.mark.slow


def test_quiet_is_reported_at_once_not_a_beat_later(redis_db, worker_factory):
    worker = worker_factory("-c", "1")
    identity = wait_for(lambda: next((p.identity for p in ProcessSet()), None), timeout=30, message="a heartbeat")
    # TSTP through Redis, as wurk_quiet sends it; a beat picks it up (and beats again only
    # BEAT_INTERVAL later).
    redis_db.lpush(keys.signals_list(identity), "TSTP")
    wait_for(lambda: redis_db.llen(keys.signals_list(identity)) == 0, timeout=30, message="the signal picked up")
    # The process is quiet within half a second of that beat: a wait shorter than a beat
    # interval is enough (before, "quiet" reached Redis only at the next beat).
    wait = BEAT_INTERVAL * 0.8
    out = StringIO()
    call_command("wurk_quiet", identity, "--wait", str(wait), stdout=out)
    assert "all 1 process(es) quiet" in out.getvalue()
    # Already quiet: answered at the first look.
    out = StringIO()
    call_command("wurk_quiet", identity, "--wait", "1", stdout=out)
    assert "all 1 process(es) quiet" in out.getvalue()
    assert worker.stop() == 0
