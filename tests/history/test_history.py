"""Historical metrics (ENT-501..506, ENT-803): rollups with a controlled clock, queries,
snapshots, the leader gate, a real worker, the admin page."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from tests.metrics.test_query import sidekiq_flush
from tests.statsd.listener import UDPListener
from tests.support import wait_for
from wurk_django import history, keys, payload
from wurk_django.conf import Config, get_config, problems
from wurk_django.history.component import HistoryComponent
from wurk_django.history.rollup import rollup_queues, rollup_throughput, snapshot
from wurk_django.history.settings import HistorySettings

# 2026-03-04 10:07:30 UTC: inside minute 10:07, 5-minute window 10:05, hour 10:00.
NOW = datetime(2026, 3, 4, 10, 7, 30, tzinfo=UTC).timestamp()
MINUTE = 60


def _at(hour: int, minute: int) -> datetime:
    return datetime(2026, 3, 4, hour, minute, tzinfo=UTC)


def test_throughput_rollup_sums_classes_and_windows(redis_db):
    """ENT-504: throughput rollup `jr|1m/5m/1h`."""
    sidekiq_flush(redis_db, _at(10, 6), {"A": {"p": 5, "f": 1, "ms": 400}, "B": {"p": 2, "ms": 100}})
    sidekiq_flush(redis_db, _at(10, 4), {"A": {"p": 1, "ms": 10}})
    sidekiq_flush(redis_db, _at(9, 58), {"B": {"p": 3, "f": 3}})
    sidekiq_flush(redis_db, _at(10, 7), {"A": {"p": 99}})  # the current minute is not complete: left alone
    assert rollup_throughput(redis_db, now=NOW) == 3
    m = int(_at(10, 6).timestamp())

    def h(key):
        return {k.decode(): int(v) for k, v in redis_db.hgetall(key).items()}

    assert h(f"jr|1m|{m}") == {"p": 7, "f": 1, "ms": 500}
    assert not redis_db.exists(f"jr|1m|{int(_at(10, 7).timestamp())}")
    assert h(f"jr|5m|{int(_at(10, 5).timestamp())}") == {"p": 7, "f": 1, "ms": 500}
    assert h(f"jr|5m|{int(_at(10, 0).timestamp())}") == {"p": 1, "f": 0, "ms": 10}
    assert h(f"jr|5m|{int(_at(9, 55).timestamp())}") == {"p": 3, "f": 3, "ms": 0}
    assert h(f"jr|1h|{int(_at(10, 0).timestamp())}") == {"p": 8, "f": 1, "ms": 510}
    assert h(f"jr|1h|{int(_at(9, 0).timestamp())}") == {"p": 3, "f": 3, "ms": 0}
    assert 86_000 < redis_db.ttl(f"jr|1m|{m}") <= 86_400
    assert 2_591_000 < redis_db.ttl(f"jr|1h|{int(_at(10, 0).timestamp())}") <= 2_592_000
    # A second run (two leaders for a moment, or a retry) converges to the same numbers.
    rollup_throughput(redis_db, now=NOW)
    assert h(f"jr|1h|{int(_at(10, 0).timestamp())}") == {"p": 8, "f": 1, "ms": 510}


def test_queue_rollup_and_queue_history(redis_db):
    """ENT-505: queue size/latency rollup `qm|`. ENT-506: ``queue_history`` gives each queue's
    points (at, size, latency), gap-filled."""
    old = payload.dumps({"class": "A", "args": [], "jid": "j1", "enqueued_at": int((NOW - 42.5) * 1000)})
    redis_db.sadd("queues", "default", "empty", "bad")
    redis_db.lpush("queue:default", old, payload.dumps({"class": "A", "args": [], "jid": "j2"}))  # old at the tail
    redis_db.lpush("queue:bad", b"not json")
    assert rollup_queues(redis_db, now=NOW) == 3
    key = f"qm|1m|{int(NOW // 60 * 60)}"
    fields = {k.decode(): v.decode() for k, v in redis_db.hgetall(key).items()}
    assert fields == {"default|sz": "2", "default|lt": "42.5", "empty|sz": "0", "empty|lt": "0.0",
                      "bad|sz": "1", "bad|lt": "0.0"}
    assert redis_db.exists(f"qm|5m|{int(NOW // 300 * 300)}") and redis_db.exists(f"qm|1h|{int(NOW // 3600 * 3600)}")
    series = {q["name"]: q["points"] for q in history.queue_history("1m", 600, now=NOW)}
    assert series["default"][-1] == {"at": int(NOW // 60 * 60), "size": 2, "latency": 42.5}
    assert series["default"][0] == {"at": int(NOW // 60 * 60) - 540, "size": 0, "latency": 0.0}  # gap-filled
    assert len(series["default"]) == 10


def test_history_query_is_gap_filled_and_clamped(redis_db):
    # ENT-506: history(bucket, window) gap-filled with zeros, clamped to retention, bucket checked.
    sidekiq_flush(redis_db, _at(10, 6), {"A": {"p": 4, "f": 1, "ms": 30}})
    rollup_throughput(redis_db, now=NOW)
    points = history.history("1m", 300, now=NOW)
    assert [p["at"] for p in points] == [int(_at(10, m).timestamp()) for m in range(3, 8)]
    assert points[-2] == {"at": int(_at(10, 6).timestamp()), "processed": 4, "failed": 1, "runtime_ms": 30}
    assert points[0]["processed"] == 0
    assert len(history.history("1m", 10 * 86400, now=NOW)) == 1440  # a day of minutes at most
    assert len(history.history("1h", None, now=NOW)) == 720
    with pytest.raises(ValueError, match="bucket"):
        history.history("2m")


def test_snapshots_stream_and_statsd_gauges(redis_db):
    # ENT-502: a snapshot's fields in the stream, unknown ones passed through, read oldest first.
    from wurk_django.statsd.client import UDPClient

    udp = UDPListener(7941)
    try:
        redis_db.sadd("queues", "default", "mail")
        redis_db.lpush("queue:mail", b"{}", b"{}")
        values = {"processed": 10, "failures": 2, "enqueued": 3, "retries": 0, "dead": 1, "scheduled": 0, "busy": 4}
        # One client, as the history component uses: its lines leave in the order they were sent.
        client = UDPClient("127.0.0.1", 7941)
        for i in range(3):
            snapshot(redis_db, collector=lambda i=i: {**values, "processed": 10 + i, "note": "x"}, cap=100,
                     statsd_client=client)
        points = history.recent(2)
        assert [p["processed"] for p in points] == [11, 12] and points[0]["note"] == "x"
        assert points[0]["at"] <= points[1]["at"]
        assert udp.wait_for("sidekiq.processed:", 3)[-1] == "sidekiq.processed:12|g"
        assert udp.wait_for("sidekiq.busy:")[0] == "sidekiq.busy:4|g"
        assert udp.wait_for("sidekiq.queue.size:", 6)[:2] == ["sidekiq.queue.size:0|g|#queue:default",
                                                              "sidekiq.queue.size:2|g|#queue:mail"]
        assert udp.wait_for("sidekiq.queue.latency:")[0] == "sidekiq.queue.latency:0|g|#queue:default"
    finally:
        udp.close()


def test_the_stream_is_trimmed_to_about_its_cap_and_read_oldest_first(redis_db):
    """ENT-502: each snapshot is an ``XADD history:metrics MAXLEN ~ cap`` (10,000 by default):
    the stream stays near its cap, not one entry per tick for ever; ``recent()`` reads the
    newest ``limit`` points, oldest first."""
    from wurk_django.history.rollup import STREAM_CAP

    assert STREAM_CAP == 10_000
    for i in range(300):
        snapshot(redis_db, collector=lambda i=i: {"processed": i}, cap=10)
    assert 10 <= redis_db.xlen(keys.HISTORY_STREAM) < 300  # "~": trimmed by whole stream nodes
    assert [p["processed"] for p in history.recent(3)] == [297, 298, 299]


def _launcher(identity: str, leader=None):
    return SimpleNamespace(state=SimpleNamespace(identity=identity), embedded=False,
                           component=lambda name: leader if name == "leader" else None,
                           config=get_config())


def test_only_one_process_rolls_up_per_interval_without_a_leader(redis_db):
    sidekiq_flush(redis_db, datetime.fromtimestamp(NOW - 120, tz=UTC), {"A": {"p": 1}})
    options = Config({}).history
    first = HistoryComponent(_launcher("a:1:x"), options)
    second = HistoryComponent(_launcher("b:2:y"), options)
    assert first.leads("rollup", 60) is True
    assert second.leads("rollup", 60) is False
    assert first.leads("snapshot", 30) is True  # each task has its own lock


def test_leader_component_and_leader_check_gate_the_rollups(redis_db):
    """ENT-309, RUN-144: the rollups run on the leader only (or where the leader check says)."""
    class Leader:
        def __init__(self, value):
            self.value = value

        def is_leader(self):
            return self.value

    options = Config({}).history
    assert HistoryComponent(_launcher("a", Leader(True)), options).leads("rollup", 60) is True
    assert HistoryComponent(_launcher("b", Leader(False)), options).leads("rollup", 60) is False
    history.set_leader_check(lambda launcher: launcher.state.identity == "c")
    try:
        assert HistoryComponent(_launcher("c", Leader(False)), options).leads("rollup", 60) is True
        follower = HistoryComponent(_launcher("d"), options)
        follower.rollup_tick()
        assert not redis_db.keys("qm|*")
    finally:
        history.set_leader_check(None)


def test_settings_are_checked():
    assert not problems({"HISTORY": {"ROLLUP_INTERVAL": 30, "SNAPSHOT_INTERVAL": 10, "STREAM_CAP": 500}})
    assert not problems({"HISTORY": False})
    for bad in ({"ROLLUP_INTERVAL": 1}, {"STREAM_CAP": 5}, {"BOGUS": 1}, True, {"SNAPSHOT_INTERVAL": "x"}):
        assert problems({"HISTORY": bad}), bad
    assert Config({"HISTORY": False}).history is None
    assert Config({}).history == HistorySettings(rollup_interval=60, snapshot_interval=None, stream_cap=10_000)
    assert Config({"HISTORY": {"STREAM_CAP": 500}}).history.stream_cap == 500


@pytest.mark.slow
def test_a_worker_rolls_up_and_snapshots(redis_db, worker_factory):
    now = datetime.now(UTC)
    previous = datetime.fromtimestamp(now.timestamp() // 60 * 60 - 60, tz=UTC)
    sidekiq_flush(redis_db, previous, {"A": {"p": 6, "f": 1, "ms": 50}})  # as a metrics flush left it
    redis_db.sadd("queues", "default")
    extra = {"HISTORY": {"ROLLUP_INTERVAL": 5, "SNAPSHOT_INTERVAL": 2}}
    worker = worker_factory("-c", "1", env={"WURK_TEST_EXTRA": json.dumps(extra)})
    key = f"jr|1m|{int(previous.timestamp())}"
    wait_for(lambda: redis_db.exists(key), timeout=20, message="the minute rolled up")
    assert int(redis_db.hget(key, "p")) == 6
    wait_for(lambda: redis_db.keys("qm|1m|*"), message="the queue gauges")
    wait_for(lambda: len(history.recent(10)) >= 1, message="a snapshot")
    assert worker.stop() == 0


@pytest.mark.django_db
def test_historical_page(admin_client, redis_db):
    from wurk_django.api import Deploy

    now = datetime.now(UTC)
    previous = datetime.fromtimestamp(now.timestamp() // 60 * 60 - 60, tz=UTC)
    sidekiq_flush(redis_db, previous, {"A": {"p": 6, "f": 1, "ms": 50}})
    rollup_throughput(redis_db)
    redis_db.sadd("queues", "default")
    rollup_queues(redis_db)
    Deploy().mark("v1.2.3 fix", at=previous)
    base = "/admin/wurk_django/dashboard/"
    html = admin_client.get(base + "history/").content.decode()
    assert "a window ending now, summed from per-minute job metrics" in html
    assert "6 processed, 1 failed in 24h; 1 deploy marked" in html
    data = json.loads(html.split('id="wurk-history-throughput" type="application/json">')[1].split("</script>")[0])
    assert len(data["labels"]) == 1440 and sum(data["series"][0]["values"]) == 6
    assert data["marks"] == [{"at": previous.strftime("%H:%M"), "label": "v1.2.3 fix"}]
    assert '<a href="?range=7d">7d</a>' in html
    assert admin_client.get(base + "history/?range=30d").status_code == 200
    assert admin_client.get(base + "history/?range=bogus").status_code == 200
    assert 'href="/admin/wurk_django/dashboard/history/"' in admin_client.get(base).content.decode()


def test_the_leaders_rollup_and_snapshot_start_off_the_heartbeats_beat_RUN_130():
    """A minute's rollup (and a 30 s snapshot) started with the 10 s beat would run with one
    every time, on the leader: the idle bench showed that process holding a second main
    pool connection for the two. Their first waits come 0.5-5 s past the interval."""
    from wurk_django.history.component import HistoryComponent
    from wurk_django.history.settings import HistorySettings

    component = HistoryComponent(None, HistorySettings(rollup_interval=60, snapshot_interval=30))
    rollup, snapshot = (loop._first_wait for loop in component.loops)
    assert 60.5 <= rollup <= 65 and 30.5 <= snapshot <= 35


def test_the_rollup_writes_to_the_workers_own_redis_not_the_settings_default(redis_db):
    """A --shard worker's (or any worker's) history rollup and its lock go to the Redis the
    worker runs on: the component used the settings' default client (and, with another
    CONCURRENCY, a second pool whose connection stayed open)."""
    from tests.redis_servers import TCPRedis
    from wurk_django.history.component import HistoryComponent
    from wurk_django.history.settings import HistorySettings

    server = TCPRedis().start()
    try:
        config = Config(REDIS_URL=server.url(2), CONCURRENCY=1)
        launcher = SimpleNamespace(config=config, state=SimpleNamespace(identity="host:1:abc"),
                                   component=lambda name: None)
        HistoryComponent(launcher, HistorySettings(rollup_interval=60)).rollup_tick()
        assert server.client(2).exists(f"{keys.HISTORY_LOCK}:rollup")  # the lock, taken on the worker's Redis
        assert redis_db.dbsize() == 0
    finally:
        server.stop()
