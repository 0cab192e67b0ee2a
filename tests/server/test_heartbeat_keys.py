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


def test_core_150_one_beat_flushes_the_stats_writes_the_work_pings_and_registers(redis_db, launcher, monkeypatch):
    """CORE-150: every 10 s a beat (1) flushes the stat counters, (2) rewrites the busy
    hash, (3) measures a ``PING`` round trip, (4) lists the process and writes its hash
    with a 60 s TTL, (5) fires ``heartbeat`` when the entry was new and ``beat`` always,
    (6) acts on a popped dashboard signal; a failing stats flush is logged, not fatal."""
    from wurk_django import signals
    from wurk_django.server import heartbeat as heartbeat_mod

    assert heartbeat_mod.BEAT_INTERVAL == 10
    fired = []

    def on_heartbeat(**kwargs):
        fired.append("heartbeat")

    def on_beat(**kwargs):
        fired.append("beat")

    signals.worker_heartbeat.connect(on_heartbeat)
    signals.worker_beat.connect(on_beat)
    told = []
    launcher.heartbeat.on_signal = told.append
    identity = launcher.state.identity
    try:
        launcher.state.begin("t1", "default", payload.dumps({"class": "X", "args": [], "jid": "c" * 24}))
        launcher.state.end("t1", failed=False)
        launcher.state.begin("t2", "default", payload.dumps({"class": "X", "args": [], "jid": "d" * 24}))
        redis_db.lpush(keys.signals_list(identity), "TSTP")
        launcher.heartbeat.beat()
        assert redis_db.get("stat:processed") == b"1"
        assert list(redis_db.hkeys(keys.work(identity))) == [b"t2"]
        assert int(redis_db.hget(identity, "rtt_us")) > 0
        assert redis_db.sismember("processes", identity) and 0 < redis_db.ttl(identity) <= TTL
        assert fired == ["heartbeat", "beat"] and told == ["TSTP"]
        monkeypatch.setattr(heartbeat_mod, "flush_stats", lambda *a: 1 / 0)
        launcher.heartbeat.beat()  # logged; the beat goes on
        assert fired == ["heartbeat", "beat", "beat"]
    finally:
        signals.worker_heartbeat.disconnect(on_heartbeat)
        signals.worker_beat.disconnect(on_beat)
