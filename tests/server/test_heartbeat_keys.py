"""What one heartbeat writes to Redis and what a clean stop removes, read back from the
keys (a launcher built in this process, its beats called by hand: no thread, no timer)."""

from __future__ import annotations

import json

import pytest

from wurk_django import keys, payload
from wurk_django.conf import Config
from wurk_django.server.heartbeat import TTL


@pytest.fixture
def launcher(redis_db):
    from wurk_django.server.launcher import Launcher

    launcher = Launcher(Config(), embedded=True)
    yield launcher
    launcher.heartbeat.clear()


def test_core_057_058_a_beat_lists_the_process_and_writes_its_hash_for_60_s(redis_db, launcher):
    # ENT-003: the identity in `processes` is the state's own.
    """CORE-057: the beat adds the identity to ``processes``; CORE-058: the ``<identity>``
    hash holds the heartbeat fields and expires in 60 s unless beaten again."""
    identity = launcher.state.identity
    launcher.heartbeat.beat()
    assert redis_db.smembers("processes") == {identity.encode()}
    fields = redis_db.hgetall(identity)
    assert {b"info", b"concurrency", b"busy", b"beat", b"quiet", b"rss", b"rtt_us"} <= set(fields)
    assert json.loads(fields[b"info"])["identity"] == identity and fields[b"quiet"] == b"false"
    assert TTL == 60 and 0 < redis_db.ttl(identity) <= 60


def test_core_059_the_busy_hash_has_one_entry_per_busy_thread_for_60_s(redis_db, launcher):
    """CORE-059: ``<identity>:work`` maps each busy thread's tid to ``{"queue", "payload",
    "run_at"}`` (the payload as JSON text), expires in 60 s, and is gone once nothing runs."""
    identity = launcher.state.identity
    raw = payload.dumps({"class": "HardJob", "args": [1], "jid": "a" * 24, "queue": "critical"})
    launcher.state.begin("t1", "critical", raw)
    launcher.heartbeat.beat()
    [(tid, value)] = redis_db.hgetall(keys.work(identity)).items()
    entry = json.loads(value)
    assert tid == b"t1" and set(entry) == {"queue", "payload", "run_at"}
    assert entry["queue"] == "critical" and entry["payload"] == raw.decode() and isinstance(entry["run_at"], int)
    assert 0 < redis_db.ttl(keys.work(identity)) <= 60
    launcher.state.end("t1", failed=False)
    launcher.heartbeat.beat()
    assert not redis_db.exists(keys.work(identity))


def test_core_253_a_beat_pops_up_to_ten_signals(redis_db, launcher, caplog):
    """CORE-253: each beat takes up to 10 signals off ``<identity>-signals`` (wurk's LPOP x10;
    Sidekiq's one a beat is also compatible); unknown ones are ignored with a warning."""
    signals_key = keys.signals_list(launcher.state.identity)
    redis_db.lpush(signals_key, *[f"NOPE{n}" for n in range(12)])
    launcher.heartbeat.beat()
    assert redis_db.llen(signals_key) == 2
    launcher.heartbeat.beat()
    assert redis_db.llen(signals_key) == 0
    assert sum("ignoring unknown signal" in r.getMessage() for r in caplog.records) == 12


def test_core_254_a_clean_stop_removes_the_process_and_both_hashes(redis_db, launcher):
    """CORE-254: the teardown SREMs the identity and UNLINKs ``<identity>:work`` and the
    ``<identity>`` hash itself (Sidekiq leaves that one to expire; either is compatible)."""
    identity = launcher.state.identity
    launcher.state.begin("t1", "default", payload.dumps({"class": "X", "args": [], "jid": "b" * 24}))
    launcher.heartbeat.beat()
    assert redis_db.exists(identity, keys.work(identity)) == 2
    launcher.heartbeat.clear()
    assert not redis_db.sismember("processes", identity)
    assert redis_db.exists(identity, keys.work(identity)) == 0


def test_core_156_quiet_is_idempotent_stops_the_poller_and_later_beats_say_quiet(redis_db, launcher):
    """CORE-156: quiet fires the ``quiet`` event once however often it is asked, terminates
    the scheduled-set poller, and the beats that follow write ``quiet="true"``. (A real
    worker told TSTP fetching nothing more: tests/server/test_worker.py.)"""
    from wurk_django import signals

    quiets = []

    def on_quiet(sender, launcher, **kwargs):
        quiets.append(launcher)

    signals.worker_quiet.connect(on_quiet)
    try:
        launcher.quiet()
        launcher.quiet()
    finally:
        signals.worker_quiet.disconnect(on_quiet)
    assert quiets == [launcher] and launcher.scheduler.loop.done
    launcher.heartbeat.beat()
    assert redis_db.hget(launcher.state.identity, "quiet") == b"true"
