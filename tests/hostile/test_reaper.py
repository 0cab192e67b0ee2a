"""Issue 12, items 5 and 6: reclaimers racing on one orphan list; a deep job on its third recovery."""

from __future__ import annotations

import json
import threading

from tests.server.fetch.test_reliable import _dead_pid, _job
from wurk_django.server.fetch.reliable import private_list
from wurk_django.server.reaper import Reaper

JIDS = [f"{i:024x}" for i in range(3)]


def _race(reclaimers: int, orphan: str) -> list[int]:
    barrier = threading.Barrier(reclaimers)
    moved: list[int] = []

    def reclaim() -> None:
        barrier.wait()
        moved.append(Reaper(["default"], grace=0).drain(orphan, "queue:default"))

    threads = [threading.Thread(target=reclaim) for _ in range(reclaimers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    return moved


def test_four_concurrent_reclaimers_count_each_recovery_once(redis_db):
    # Item 5: LINDEX, INCR, then a guarded push let every reclaimer count the same job.
    orphan = private_list("default", _dead_pid())
    buried = double = 0
    for _trial in range(100):
        redis_db.delete("queue:default", "dead", orphan, *["super_fetch:recovered:" + j for j in JIDS])
        for jid in JIDS:
            redis_db.set("super_fetch:recovered:" + jid, 1)  # recovered once before: one more is still fine
        redis_db.lpush(orphan, *[_job(jid) for jid in JIDS])
        moved = _race(4, orphan)
        queued = [json.loads(raw)["jid"] for raw in redis_db.lrange("queue:default", 0, -1)]
        counts = [int(redis_db.get("super_fetch:recovered:" + jid)) for jid in JIDS]
        buried += redis_db.zcard("dead")
        double += sum(1 for c in counts if c != 2)
        assert sum(moved) == len(JIDS)
        assert sorted(queued) == JIDS  # each exactly once
        assert not redis_db.exists(orphan)
    assert buried == 0 and double == 0


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_a_deep_job_does_not_stop_the_reaper_for_the_rest_of_its_list(redis_db):
    # Item 6: burying a 400-level job on its third recovery raised and stopped the drain.
    orphan = private_list("default", _dead_pid())
    deep = json.dumps({"class": "tests.jobsapp.jobs.RecordJob", "args": _nested(400), "jid": "d" * 24,
                       "retry": True, "queue": "default"}, separators=(",", ":")).encode()
    redis_db.set("super_fetch:recovered:" + "d" * 24, 2)
    redis_db.lpush(orphan, _job("e" * 24), deep, _job("f" * 24))  # the deep one is in the middle
    assert Reaper(["default"], grace=0).drain(orphan, "queue:default") == 3
    queued = redis_db.lrange("queue:default", 0, -1)
    assert sorted(json.loads(raw)["jid"] for raw in queued if raw != deep) == ["e" * 24, "f" * 24]
    assert not redis_db.exists(orphan)
    # Not counted (it can never run): back on its queue, where the processor dead-sets it with its reason.
    assert deep in queued


def test_jobs_of_one_crash_go_back_spaced_apart(redis_db):
    # Item 4: the newest to the fetch end, each other one a crash-size further in, order kept.
    orphan = private_list("default", _dead_pid())
    crash = [f"{i:024x}" for i in range(100, 104)]
    others = [f"{i:024x}" for i in range(200, 230)]
    redis_db.lpush("queue:default", *[_job(j) for j in others])  # others[0] is fetched first
    redis_db.lpush(orphan, *[_job(j) for j in crash])  # crash[-1] was fetched last
    assert Reaper(["default"], grace=0).drain(orphan, "queue:default") == 4
    fetch_order = [json.loads(raw)["jid"] for raw in reversed(redis_db.lrange("queue:default", 0, -1))]
    positions = sorted(fetch_order.index(j) for j in crash)
    assert positions[0] == 0  # the newest one is fetched next
    assert all(b - a >= len(crash) for a, b in zip(positions, positions[1:], strict=False))
    assert [j for j in fetch_order if j in others] == others  # the others keep their order
