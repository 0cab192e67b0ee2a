"""The reaper's two sweeps and its locks on the test database (PRO-136, PRO-138)."""

from __future__ import annotations

from wurk_django import keys, payload
from wurk_django.server.reaper import FULL_INTERVAL, LOCK_MARK, Reaper


def _orphan(redis_db, queue: str) -> str:
    """A private list of a process on another host that never beat: dead."""
    name = f"queue:{queue}|elsewhere|4242|0123456789ab|0"
    redis_db.rpush(name, payload.dumps({"class": "X", "args": [queue], "jid": payload.new_jid(), "queue": queue,
                                        "created_at": payload.now_ms()}))
    return name


def test_pro_138_a_scoped_sweep_takes_the_served_queues_and_a_full_one_every_queue(redis_db):
    """PRO-138: the scoped sweep scans ``queue:<q>|*`` for the queues this process serves
    only; the full sweep scans ``queue:*|*``, so it also brings back the private lists of
    a queue nobody here serves."""
    reaper = Reaper(["served"], grace=0)
    served, other = _orphan(redis_db, "served"), _orphan(redis_db, "other")
    assert reaper.sweep(full=False) == 1
    assert not redis_db.exists(served) and redis_db.llen("queue:served") == 1
    assert redis_db.exists(other) and not redis_db.exists("queue:other")
    assert reaper.sweep(full=True) == 1
    assert not redis_db.exists(other) and redis_db.llen("queue:other") == 1


def test_pro_136_a_tick_takes_the_interval_lock_and_the_hourly_full_lock(redis_db):
    """PRO-136: a tick takes ``super_fetch:reaper`` for one interval (``NX EX``) and
    ``super_fetch:reaper:full`` for an hour; while another process holds both, a tick
    sweeps nothing of another host (the locks are leader-independent: no leader here).
    Deliberately unlike Sidekiq Pro, the interval lock's holder sweeps every queue (issue
    26 item 3: a fleet shared with Ruby), so the orphan of an unserved queue comes back."""
    reaper = Reaper(["served"], interval=30, grace=0)
    redis_db.set(keys.REAPER_LOCK, "another process", ex=60)
    redis_db.set(keys.REAPER_FULL_LOCK, 1, ex=FULL_INTERVAL)
    redis_db.set(keys.REAPER_OTHERS_LOCK, 1, ex=60)
    other = _orphan(redis_db, "other")
    reaper.tick()
    assert redis_db.exists(other)
    redis_db.delete(keys.REAPER_LOCK, keys.REAPER_FULL_LOCK, keys.REAPER_OTHERS_LOCK)
    reaper.tick()
    assert not redis_db.exists(other) and redis_db.llen("queue:other") == 1
    assert redis_db.get(keys.REAPER_LOCK) == LOCK_MARK.encode() and 0 < redis_db.ttl(keys.REAPER_LOCK) <= 30
    assert 30 < redis_db.ttl(keys.REAPER_FULL_LOCK) <= FULL_INTERVAL
