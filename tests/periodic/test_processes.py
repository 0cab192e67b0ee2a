"""Leader election and periodic jobs across real worker processes (ENT-305, ENT-411..415).

Three ``manage.py wurk`` processes run with short leader intervals (WURK["LEADER"])
and the test-only accelerated clock (WURK_TEST_CLOCK): a cron minute passes in
SECONDS_PER_MINUTE real seconds, so several ticks take seconds, not minutes.
"""

from __future__ import annotations

import json
import time

from tests.support import wait_for

SPEED = 12
SECONDS_PER_MINUTE = 60 / SPEED
LEADER = {"TTL": 1, "RENEW_INTERVAL": 0.3, "FOLLOWER_INTERVAL": 0.3, "INITIAL_WAIT": 0, "CACHE_TTL": 0.2}
EVERY_MINUTE = {"cron": "* * * * *", "job": "tests.jobsapp.jobs.CronRecordJob", "args": ["tick"]}
PAUSED = {"cron": "* * * * *", "job": "tests.jobsapp.jobs.CronRecordJob", "args": ["paused"], "paused": True}


def start_workers(worker_factory, count=3, speed=SPEED):
    env = {
        "WURK_TEST_EXTRA": json.dumps({"LEADER": LEADER, "PERIODIC": [EVERY_MINUTE, PAUSED]}),
        "WURK_TEST_CLOCK": f"{time.time():.3f},{speed}",
    }
    return [worker_factory("-c", "2", env=env) for _ in range(count)]


def leader_pid(redis_db) -> int | None:
    value = redis_db.get("dear-leader")
    return int(value.decode().split(":")[-2]) if value else None


def fires(redis_db, lid):
    return [json.loads(raw) for raw in reversed(redis_db.lrange(f"loop-history:{lid}", 0, -1))]


def lids(redis_db):
    out = {}
    for lid in redis_db.smembers("periodic"):
        options = json.loads(redis_db.hget(b"loops:" + lid, "options"))
        out[options["args"][0]] = lid.decode()
    return out


def assert_once_per_minute(history):
    minutes = [fired_at // 60 for fired_at, _jid in history]
    assert minutes == list(range(minutes[0], minutes[0] + len(minutes))), f"a tick lost or doubled: {history}"
    assert len({jid for _at, jid in history}) == len(history)


def _ran_as_fired(redis_db, lid) -> list[str] | None:
    """The runs of loop ``lid``'s jobs when they are its recorded fires, each once; else None."""
    ran = sorted(raw.decode() for raw in redis_db.lrange("test:cron", 0, -1))
    fired = sorted(f"tick:{jid}" for _at, jid in fires(redis_db, lid))
    return ran if ran == fired else None


def test_cron_fires_once_per_tick_across_three_workers_and_a_leader_kill(redis_db, worker_factory):
    # ENT-305, ENT-411..415, RUN-143: three processes, one leader; kill -9 it; the
    # follower that takes over keeps every tick firing exactly once. A cron minute is 10 real
    # seconds here, not 5: two handovers on a loaded machine (CI runs two suites side by side)
    # must not be read as a lost tick because a stalled process missed a 5 s minute.
    workers = start_workers(worker_factory, speed=6)
    by_pid = {w.pid: w for w in workers}
    wait_for(lambda: leader_pid(redis_db) in by_pid, timeout=30, message="a leader among the workers")
    wait_for(lambda: len(lids(redis_db)) == 2, timeout=10, message="the loops to be registered")
    tick = lids(redis_db)["tick"]
    wait_for(lambda: len(fires(redis_db, tick)) >= 2, timeout=60, message="two ticks")

    # Kill the leader just after a fire, so the handover happens mid-minute.
    count = len(fires(redis_db, tick))
    wait_for(lambda: len(fires(redis_db, tick)) > count, timeout=25, message="another tick")
    old = leader_pid(redis_db)
    by_pid[old].kill()
    killed_at = time.monotonic()
    # A follower takes over; how fast (TTL + follower interval, about 1.3 s here) is a figure
    # printed for the docs, not asserted: a loaded machine may stretch it.
    wait_for(lambda: leader_pid(redis_db) not in (None, old), timeout=60, interval=0.02,
             message="a follower to lead")
    print(f"[leader handover after kill -9] {time.monotonic() - killed_at:.2f}s (TTL + follower interval: "
          f"{LEADER['TTL'] + LEADER['FOLLOWER_INTERVAL']:.1f}s)")
    new = leader_pid(redis_db)
    assert by_pid[new].alive()

    # Two more ticks under the new leader.
    count = len(fires(redis_db, tick))
    wait_for(lambda: len(fires(redis_db, tick)) >= count + 2, timeout=45, message="two ticks after the kill")

    # A clean stop hands over at once (no TTL to wait out).
    by_pid[new].stop()
    third = wait_for(lambda: leader_pid(redis_db) not in (None, old, new) and leader_pid(redis_db),
                     timeout=2 * LEADER["FOLLOWER_INTERVAL"] + 2, interval=0.02, message="the last worker to lead")
    count = len(fires(redis_db, tick))
    wait_for(lambda: len(fires(redis_db, tick)) >= count + 1, timeout=30, message="a tick under the third leader")
    time.sleep(0.5)

    history = fires(redis_db, tick)
    assert len(history) >= 6
    assert_once_per_minute(history)
    # Each fire ran once, and nothing else ran (no paused runs). The leader keeps firing
    # while this reads, and a fire is pushed before it is recorded: both are read again
    # until they agree, which a lost, doubled or paused run never lets them do.
    ran_and_fired = wait_for(lambda: _ran_as_fired(redis_db, tick), timeout=20, message="each fire to run once")
    assert len(ran_and_fired) >= len(history)
    # A paused loop never fires.
    assert fires(redis_db, lids(redis_db)["paused"]) == []
    assert redis_db.hget(f"loops:{lids(redis_db)['paused']}", "lf") is None
    assert by_pid[third].alive()
    missed = [w for w in workers if "missed tick" in w.output()]
    assert not missed


def test_two_processes_that_both_believe_they_lead_fire_each_tick_once(redis_db, worker_factory):
    # RUN-144: cron runs in every process, only a leader enqueues, and each due tick is
    # claimed by compare-and-swap, so two processes that both lead fire it once.
    # ENT-308, ENT-412/413: the lock moves behind the old leader's back right after it
    # renewed, so its cached "I lead" holds for CACHE_TTL (several cron minutes): both
    # pollers tick as leader, and each slot still fires exactly once.
    overlap = 15
    slow_to_notice = {"TTL": 60, "RENEW_INTERVAL": overlap, "FOLLOWER_INTERVAL": 0.3, "INITIAL_WAIT": 0,
                      "CACHE_TTL": overlap}
    env = {
        "WURK_TEST_EXTRA": json.dumps({"LEADER": slow_to_notice, "PERIODIC": [EVERY_MINUTE]}),
        "WURK_TEST_CLOCK": f"{time.time():.3f},{SPEED}",
    }
    workers = [worker_factory("-c", "1", env=env) for _ in range(2)]
    by_pid = {w.pid: w for w in workers}
    wait_for(lambda: redis_db.scard("processes") == 2, timeout=30, message="both workers to beat")
    wait_for(lambda: leader_pid(redis_db) in by_pid, timeout=30, message="a leader")
    wait_for(lambda: len(lids(redis_db)) == 1, timeout=10, message="the loop")
    tick = lids(redis_db)["tick"]
    wait_for(lambda: len(fires(redis_db, tick)) >= 1, timeout=30, message="a first tick")
    old = leader_pid(redis_db)
    other = next(pid for pid in by_pid if pid != old)
    identity = next(m.decode() for m in redis_db.smembers("processes") if f":{other}:" in m.decode())
    # Wait for the old leader's renewal (its lock's TTL jumps back up), then move the lock.
    last = redis_db.pttl("dear-leader")
    while True:
        now = redis_db.pttl("dear-leader")
        if now > last:
            break
        last = now
        time.sleep(0.01)
    redis_db.set("dear-leader", identity, px=60_000)
    moved_at = time.monotonic()
    count = len(fires(redis_db, tick))
    wait_for(lambda: "no longer leads" in by_pid[old].output(), timeout=overlap + 15,
             message="the old leader to notice")
    noticed_after = time.monotonic() - moved_at
    # It ticked as leader at every cron minute before noticing: at least two of them.
    assert noticed_after >= 2 * SECONDS_PER_MINUTE, noticed_after
    assert "leads: it fires periodic jobs now" in by_pid[other].output()
    assert len(fires(redis_db, tick)) >= count + 2
    assert_once_per_minute(fires(redis_db, tick))
