"""ProcessSet, Process signals, WorkSet (CORE-167, CORE-168, CORE-169, CORE-060, CORE-061, CORE-076, CORE-077)."""

from __future__ import annotations

import time

import orjson
import pytest

from tests.api.helpers import job, raw
from wurk_django.api import EmbeddedProcessError, JobRecord, Process, ProcessSet, Workers, WorkSet


def beat(redis_db, identity: str, *, busy: int = 0, concurrency: int | None = 5, quiet: str = "false",
         rss: int = 1000, **info_extra) -> None:
    """Write a heartbeat the way a Sidekiq 8.1.5+ process does (CORE-076)."""
    info = {"hostname": identity.split(":")[0], "started_at": 1_700_000_000.5, "pid": 123, "tag": "app",
            "concurrency": 10, "queues": ["default"], "labels": ["blue"], "identity": identity,
            "version": "8.1.0", "embedded": False,
            "capsules": {"default": {"concurrency": 5, "mode": "weighted", "weights": {"critical": 2, "default": 1}}}}
    info.update(info_extra)
    fields = {"info": orjson.dumps(info), "busy": busy, "beat": time.time(), "quiet": quiet, "rss": rss,
              "rtt_us": 250}
    if concurrency is not None:
        fields["concurrency"] = concurrency
    redis_db.sadd("processes", identity)
    redis_db.hset(identity, mapping=fields)
    redis_db.expire(identity, 60)


def test_cleanup_removes_ids_whose_hash_has_no_info_under_the_lock(redis_db):
    # CORE-167 / CORE-061: SET process_cleanup NX EX 60, SSCAN, HGET info, SREM the dead.
    beat(redis_db, "alive:1:aa")
    redis_db.sadd("processes", "gone:2:bb", "half:3:cc")
    redis_db.hset("half:3:cc", "busy", "1")  # a hash without ``info`` is a dead process too
    assert ProcessSet(clean=False).size == 3
    ps = ProcessSet()
    assert redis_db.smembers("processes") == {b"alive:1:aa"}
    assert 0 < redis_db.ttl("process_cleanup") <= 60
    assert ps.size == 1
    # Within the minute the lock stops a second pass.
    redis_db.sadd("processes", "gone:4:dd")
    assert ProcessSet(clean=False).cleanup() == 0
    assert redis_db.sismember("processes", "gone:4:dd")
    redis_db.delete("process_cleanup")
    assert ProcessSet(clean=False).cleanup() == 1


def test_cleanup_handles_more_than_one_batch(redis_db):
    redis_db.sadd("processes", *[f"dead:{i}:x" for i in range(250)])
    beat(redis_db, "alive:1:aa")
    assert ProcessSet(clean=False).cleanup() == 250
    assert redis_db.smembers("processes") == {b"alive:1:aa"}


def test_iteration_merges_heartbeat_fields_sorted_and_skips_missing_info(redis_db):
    # CORE-167: sorted ids, HMGET info concurrency busy beat quiet rss rtt_us, skip missing info.
    beat(redis_db, "zeta:2:bb", busy=3, rss=2048)
    beat(redis_db, "alpha:1:aa", busy=1, concurrency=None, rss=1024)  # pre-8.1.5: concurrency only in info
    redis_db.sadd("processes", "ghost:9:zz")
    processes = list(ProcessSet(clean=False))
    assert [p.identity for p in processes] == ["alpha:1:aa", "zeta:2:bb"]
    alpha, zeta = processes
    assert isinstance(alpha, Process)
    assert alpha["busy"] == 1 and zeta["busy"] == 3
    assert alpha["concurrency"] == 10  # from info
    assert zeta["concurrency"] == 5  # the hash field wins (CORE-255)
    assert zeta["rss"] == 2048 and zeta["rtt_us"] == 250
    assert isinstance(zeta["beat"], float) and zeta["beat"] > 0
    assert zeta["hostname"] == "zeta" and zeta["pid"] == 123
    ps = ProcessSet(clean=False)
    assert ps.size == 3  # raw SCARD, ghost included
    assert ps.total_concurrency == 15
    assert ps.total_rss_in_kb == 3072 == ps.total_rss
    assert ps.get("zeta:2:bb")["busy"] == 3
    assert ps.get("ghost:9:zz") is None


def test_process_accessors(redis_db):
    # CORE-168: tag, labels, identity, queues (capsule weight keys), weights, capsules, version,
    # embedded, stopping, leader.
    # CORE-063: the data API reads dear-leader and never writes it.
    beat(redis_db, "host:1:aa", quiet="true")
    beat(redis_db, "old:2:bb", capsules=None, queues=["low", "high"], weights=[{"low": 1, "high": 2}])
    redis_db.set("dear-leader", "host:1:aa")
    host, old = ProcessSet(clean=False)
    assert host.tag == "app" and host.labels == ["blue"] and host.version == "8.1.0"
    assert host.queues == ["critical", "default"]
    assert host.weights == [{"critical": 2, "default": 1}]
    assert host.capsules["default"]["concurrency"] == 5
    assert host.embedded is False
    assert host.stopping is True and old.stopping is False
    assert host.leader is True and old.leader is False
    assert old.queues == ["low", "high"]
    assert old.weights == [{"low": 1, "high": 2}]
    assert host.started_at.timestamp() == 1_700_000_000.5
    assert ProcessSet(clean=False).leader == "host:1:aa"
    redis_db.delete("dear-leader")
    assert ProcessSet(clean=False).leader == ""


@pytest.mark.parametrize(("action", "signal"), [("quiet", b"TSTP"), ("stop", b"TERM"), ("dump_threads", b"TTIN")])
def test_signals_are_pushed_with_a_ttl(redis_db, action, signal):
    # CORE-168 / CORE-060: MULTI LPUSH <id>-signals <sig>; EXPIRE 60.
    beat(redis_db, "host:1:aa")
    process = ProcessSet(clean=False).get("host:1:aa")
    getattr(process, action)()
    assert redis_db.lrange("host:1:aa-signals", 0, -1) == [signal]
    assert 55 < redis_db.ttl("host:1:aa-signals") <= 60


def test_quiet_then_stop_keeps_order_for_rpop(redis_db):
    beat(redis_db, "host:1:aa")
    process = ProcessSet(clean=False).get("host:1:aa")
    process.quiet()
    process.stop()
    # The heartbeat RPOPs: quiet must be seen before stop.
    assert redis_db.rpop("host:1:aa-signals") == b"TSTP"
    assert redis_db.rpop("host:1:aa-signals") == b"TERM"


def test_embedded_processes_refuse_quiet_and_stop(redis_db):
    # CORE-160: the API refuses to quiet/stop an embedded process.
    beat(redis_db, "emb:1:aa", embedded=True)
    process = ProcessSet(clean=False).get("emb:1:aa")
    assert process.embedded is True
    with pytest.raises(EmbeddedProcessError):
        process.quiet()
    with pytest.raises(EmbeddedProcessError):
        process.stop()
    assert redis_db.exists("emb:1:aa-signals") == 0
    process.dump_threads()
    assert redis_db.lrange("emb:1:aa-signals", 0, -1) == [b"TTIN"]


def test_workset_yields_running_jobs_ordered_by_run_at(redis_db):
    # CORE-169 / CORE-077: HGETALL <id>:work; payload as a string, or an object (Sidekiq 6).
    beat(redis_db, "b:2:bb", busy=1)
    beat(redis_db, "a:1:aa", busy=2)
    slow = raw(job("slowjid", queue="critical"))
    redis_db.hset("a:1:aa:work", mapping={
        "t1": orjson.dumps({"queue": "critical", "payload": slow.decode(), "run_at": 1_700_000_300}),
        "t2": orjson.dumps({"queue": "default", "payload": job("sk6jid"), "run_at": 1_700_000_100}),
    })
    redis_db.hset("b:2:bb:work", "t9", orjson.dumps(
        {"queue": "default", "payload": raw(job("bjid")).decode(), "run_at": 1_700_000_200}))
    rows = list(WorkSet())
    assert [(pid, tid) for pid, tid, _ in rows] == [("a:1:aa", "t2"), ("b:2:bb", "t9"), ("a:1:aa", "t1")]
    pid, tid, work = rows[2]
    assert work.queue == "critical"
    assert work.run_at.timestamp() == 1_700_000_300
    assert work.payload == slow.decode()
    assert isinstance(work.job, JobRecord) and work.job.jid == "slowjid" and work.job.value == slow
    assert rows[0][2].job.jid == "sk6jid"  # object payload accepted
    assert orjson.loads(rows[0][2].payload)["jid"] == "sk6jid"
    assert WorkSet().size == 3  # Σ busy
    assert WorkSet().find_work("bjid").process_id == "b:2:bb"
    assert WorkSet().find_work("nope") is None
    assert Workers is WorkSet


def test_workset_empty(redis_db):
    assert list(WorkSet()) == []
    assert WorkSet().size == 0
