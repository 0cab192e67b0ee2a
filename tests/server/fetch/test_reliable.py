"""Reliable fetch, the reaper and poison pills, in-process against the test Redis (PRO-110..155)."""

from __future__ import annotations

import json
import os
import select
import threading
import time
from collections import Counter

import pytest
import redis as redis_lib

from wurk_django import payload, wake_demand
from wurk_django.api import Queue
from wurk_django.conf import Config
from wurk_django.pause import PausedCache, pause, unpause
from wurk_django.redis.connection import get_redis
from wurk_django.server import poison
from wurk_django.server.fetch import fair
from wurk_django.server.fetch import reliable as reliable_fetch
from wurk_django.server.fetch import slot as fetch_slot
from wurk_django.server.fetch.reliable import ReliableFetch, private_list
from wurk_django.server.reaper import Reaper, parse_private
from wurk_django.server.state import NONCE, hostname


def _job(jid: str, queue: str = "default", **extra) -> bytes:
    return payload.dumps({"retry": True, "queue": queue, "class": "tests.jobsapp.jobs.RecordJob",
                          "args": [jid], "jid": jid, "created_at": 1, "enqueued_at": 1, **extra})


@pytest.fixture
def fetcher():
    fetch = ReliableFetch(Config(QUEUES=["default", "low"], FETCH_POLL_INTERVAL=1))
    yield fetch
    fetch.terminate()


def test_fetch_moves_the_job_into_the_private_list(redis_db, fetcher):
    redis_db.lpush("queue:default", _job("a" * 24))
    unit = fetcher.retrieve_work()
    private = private_list("default")
    assert private == f"queue:default|{hostname()}|{os.getpid()}|{NONCE}|0"  # PRO-110
    assert unit.job == _job("a" * 24) and unit.private == private
    assert redis_db.lrange(private, 0, -1) == [unit.job]
    assert redis_db.llen("queue:default") == 0


def test_the_fetched_bytes_are_kept_for_the_ack_and_the_requeue(redis_db, fetcher):
    """PRO-002 / RUN-830 / PRO-124: the unit keeps the payload exactly as the move returned
    it (bytes, never parsed or re-serialized by the fetcher), with its public and private
    keys and queue name: a payload that a re-serialization would change (spaces, key order,
    an escaped character, 1.0) is acknowledged and requeued by those bytes."""
    odd = b'{ "jid" : "odd000000000000000000000", "class":"X", "args":[1.0, "\\u00e9"], "queue":"default"}'
    redis_db.lpush("queue:default", odd, odd.replace(b"odd0", b"odd1"))
    unit = fetcher.retrieve_work()
    assert unit.job == odd and isinstance(unit.job, bytes)
    assert (unit.queue, unit.queue_key, unit.private) == ("default", "queue:default", private_list("default"))
    assert unit.jid in (None, "")  # the processor fills it in after parsing, not the fetcher
    unit.acknowledge()
    again = fetcher.retrieve_work()
    fetcher.flush_acks()
    assert redis_db.lrange(unit.private, 0, -1) == [again.job]  # the ACK's LREM matched the bytes
    again.requeue()
    assert redis_db.lrange("queue:default", 0, -1) == [odd.replace(b"odd0", b"odd1")]
    assert redis_db.llen(unit.private) == 0


def test_ack_rides_the_next_fetch_and_resets_the_poison_counter(redis_db, fetcher):
    # PRO-130: the ACK is the LREM of the payload plus the DEL of its poison counter.
    """PRO-150: the recovery counter is per jid and an ACK clears it (its 72 h TTL is not checked here)."""
    redis_db.lpush("queue:default", _job("a" * 24), _job("b" * 24))
    first = fetcher.retrieve_work()
    first.jid = "a" * 24
    redis_db.set("super_fetch:recovered:" + "a" * 24, 2)
    first.acknowledge()
    # Parked, not sent yet (PRO-131).
    assert redis_db.lrange(first.private, 0, -1) == [first.job]
    second = fetcher.retrieve_work()
    assert redis_db.lrange(first.private, 0, -1) == [second.job]
    assert not redis_db.exists("super_fetch:recovered:" + "a" * 24)  # PRO-155


def _count_round_trips(monkeypatch) -> list[list[str]]:
    """Every round trip from now on, as lists of command names (counted at the client, not
    by INFO commandstats, so other clients of the server cannot disturb the figures)."""
    from redis.connection import Connection

    from wurk_django.redis import wire

    sent: list[list[str]] = []
    single, many = Connection.send_command, Connection.pack_commands
    monkeypatch.setattr(Connection, "send_command",
                        lambda self, *args, **kw: sent.append([str(args[0]).lower()]) or single(self, *args, **kw))
    monkeypatch.setattr(Connection, "pack_commands",
                        lambda self, cmds: sent.append([str(c[0]).lower() for c in cmds]) or many(self, cmds))
    exchange = wire.exchange  # the batches' own path (RUN-706): one write per call
    monkeypatch.setattr(wire, "exchange",
                        lambda conn, cmds, *rest: sent.append([str(c[0]).lower() for c in cmds]) or exchange(conn, cmds, *rest))
    return sent


def test_one_round_trip_and_three_commands_per_job(redis_db, monkeypatch):
    # RUN-830: the ACK and the move go in one pipeline with no MULTI around them.
    """RUN-701: per job on a busy queue, one pipeline of LREM + DEL + LMOVE (fetching
    ahead off, ``FETCH_SIZE`` 1: each fetch moves one job)."""
    # Checks RUN-131: aCK = LREM + DEL counter, held per thread; RUN-860: hot-path caches, commands per job measured.
    fetcher = ReliableFetch(Config(QUEUES=["default", "low"], FETCH_POLL_INTERVAL=1, FETCH_SIZE=1))
    monkeypatch.setattr(fetch_slot, "PREFETCH_AFTER", 0)  # it would fetch ahead from the first fetch on
    for i in range(52):
        redis_db.lpush("queue:default", _job(f"{i:024d}"))
    # Warm up: connect, read the paused set (cached 2 s), open this thread's fetch connection.
    fetcher.retrieve_work().acknowledge()
    fetcher.retrieve_work().requeue()
    # The requeue went through the writer, which keeps its connection out of the pool:
    # open the pool connection the first plain LMOVE below uses as well.
    get_redis(config=fetcher.config).ping()
    sent = _count_round_trips(monkeypatch)
    for _ in range(50):
        unit = fetcher.retrieve_work()
        unit.jid = json.loads(unit.job)["jid"]
        unit.acknowledge()
    fetcher.flush_acks()
    commands = Counter(name for trip in sent for name in trip)
    # 50 fetches; the 1st carries no ACK, the last ACK goes out in the final flush.
    assert len(sent) == 51
    assert (commands["lmove"], commands["lrem"], commands["del"]) == (50, 50, 50)
    assert sum(commands.values()) == 150 and commands["blmove"] == 0
    fetcher.terminate()


@pytest.fixture
def instant_jobs(monkeypatch):
    """Every job counts as short enough to fetch PREFETCH at once (the count does not
    then depend on how fast this machine runs the test), and none outlives the bound past
    which a thread hands back what it fetched ahead (this test is the "job" between fetches)."""
    monkeypatch.setattr(fetch_slot, "PREFETCH_AHEAD", 3600.0)
    monkeypatch.setattr(fair, "BOUND", 3600.0)


def test_a_deep_queue_is_fetched_several_jobs_per_round_trip(redis_db, fetcher, monkeypatch, instant_jobs):
    """Issue 19 goal 3: once a thread's fetches keep hitting on short jobs, one round trip
    moves PREFETCH jobs; still one LREM per job, one DEL per round trip for all their
    poison counters, and every job fetched ahead sits in the private list until its ACK."""
    for i in range(200):
        redis_db.lpush("queue:default", _job(f"{i:024d}"))
        redis_db.set(f"super_fetch:recovered:{i:024d}", 1)
    warm = fetcher.retrieve_work()
    warm.jid = json.loads(warm.job)["jid"]
    warm.acknowledge()
    sent = _count_round_trips(monkeypatch)
    seen = []
    for _ in range(100):
        unit = fetcher.retrieve_work()
        unit.jid = json.loads(unit.job)["jid"]
        seen.append(unit.jid)
        ahead = list(fetcher._mine().ahead)
        # Fetched ahead: in the private list, not run, not ACKed.
        private = set(redis_db.lrange(unit.private, 0, -1))
        assert {u.job for u in ahead} <= private and unit.job in private
        unit.acknowledge()
    assert seen == [f"{i:024d}" for i in range(1, 101)]  # queue order kept
    fetcher.flush_acks()
    # Not round trips: the test's own reads, and (where redis-py's path serves, which counts
    # its writes here) the markers naming each job fetched ahead as it starts, written
    # without waiting for their replies (issue 28 item 1).
    sent = [trip for trip in sent if trip not in (["lrange"], ["set"])]
    commands = Counter(name for trip in sent for name in trip)
    assert commands["lrem"] == 101
    assert commands["del"] == sum(1 for trip in sent if "lrem" in trip) <= len(sent)
    assert [n for n in range(101) if redis_db.exists(f"super_fetch:recovered:{n:024d}")] == []  # PRO-155
    assert redis_db.exists(f"super_fetch:recovered:{101:024d}")  # not run yet: kept
    assert 100 <= commands["lmove"] <= 100 + fetch_slot.PREFETCH
    assert len(sent) <= 100 / fetch_slot.PREFETCH + fetch_slot.PREFETCH_AFTER + 2
    assert commands["blmove"] == 0


def _in_thread(fn):
    """Run ``fn`` on a fresh thread (a processor of its own) and return what it returned."""
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fn()))
    thread.start()
    thread.join(10)
    assert not thread.is_alive()
    return out[0]


def test_each_thread_fetches_into_a_private_list_of_its_own(redis_db, fetcher):
    """PRO-110's last segment is the fetching thread's slot: an ACK's LREM then searches
    that thread's jobs only. A slot is reused, lowest first, once its thread exits."""
    for jid in ("a", "b", "c"):
        redis_db.lpush("queue:default", _job(jid * 24))
    mine = fetcher.retrieve_work()
    assert mine.private == private_list("default", slot=0)

    def other_thread():
        unit = fetcher.retrieve_work()
        unit.jid = "b" * 24
        unit.acknowledge()
        fetcher.flush_acks()  # as a processor does when it exits, then gives its slot back
        fetcher.release_thread_connection()
        return unit

    theirs = _in_thread(other_thread)
    assert theirs.private == private_list("default", slot=1) != mine.private
    assert theirs.private.endswith(f"|{os.getpid()}|{NONCE}|1")
    assert redis_db.lrange(mine.private, 0, -1) == [mine.job]
    assert not redis_db.exists(theirs.private)  # its ACK emptied its own list
    assert _in_thread(fetcher.retrieve_work).private == theirs.private  # slot 1 again
    assert fetcher.private_lists() == [private_list(q, slot=n) for n in (0, 1) for q in ("default", "low")]


def test_slots_start_again_from_zero_after_a_fork(fetcher):
    """A fetcher built before a fork: the child's threads take slots from 0 again (the
    parent's threads are not in the child, and the child's lists carry its own pid)."""
    # Checks PRO-007: per-process state reset after fork.
    held = threading.Event()
    release = threading.Event()
    numbers = []

    def other_thread():  # holds slot 1 while the "fork" happens
        numbers.append(fetcher._mine().number)
        held.set()
        release.wait(10)

    assert fetcher._mine().number == 0
    thread = threading.Thread(target=other_thread)
    thread.start()
    try:
        assert held.wait(10) and numbers == [1]
        # What a fork looks like from the child: the slots and this thread's slot were the parent's.
        parent = fetcher._mine()
        fetcher._pid = parent.pid = os.getpid() + 1
        assert fetcher._mine().number == 0
        assert fetcher._mine() is not parent
        assert _in_thread(lambda: fetcher._mine().number) == 1  # slot 1 is held in the "parent", not here
    finally:
        release.set()
        thread.join(10)


@pytest.mark.filterwarnings("ignore:.*fork.*:DeprecationWarning")
def test_a_forked_child_fetches_into_lists_named_with_its_own_pid(redis_db, fetcher):
    """PRO-111 / RUN-132: the private-list names a fetcher computed (and cached) before a
    fork are not used by the child: its fetch goes into a list stamped with its own pid,
    which a reaper can judge, not one that reads as the still-living parent's."""
    redis_db.lpush("queue:default", _job("a" * 24), _job("b" * 24))
    mine = fetcher.retrieve_work()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            os.write(write, fetcher.retrieve_work().private.encode())
        finally:
            os._exit(0)
    os.close(write)
    ready, _, _ = select.select([read], [], [], 20)
    theirs = os.read(read, 512).decode() if ready else ""
    os.close(read)
    os.waitpid(child, 0)
    assert mine.private.endswith(f"|{os.getpid()}|{NONCE}|0")
    assert theirs == f"queue:default|{hostname()}|{child}|{NONCE}|0"
    assert redis_db.lrange(theirs, 0, -1) == [_job("b" * 24)]


def test_a_thread_that_exits_frees_its_slot_even_without_releasing_it(redis_db, fetcher):
    """The processor releases its slot as it exits; a thread that ends without doing so
    (killed by an error in between) frees it too, with what it still held: the next
    thread runs the jobs it fetched ahead and sends the ACKs it parked."""
    redis_db.lpush("queue:default", _job("a" * 24), _job("b" * 24))

    def fetch_ack_and_die():
        slot = fetcher._mine()
        unit = fetcher.retrieve_work()
        fetched = fetcher.retrieve_work()
        slot.ahead.appendleft(fetched)  # as if fetched ahead and not started
        unit.acknowledge()  # parked: no fetch after it on this thread
        return slot, unit

    slot, parked = _in_thread(fetch_ack_and_die)
    assert fetcher._free == [slot.number] == [0]
    assert redis_db.llen(parked.private) == 2
    again = _in_thread(lambda: (fetcher._mine(), fetcher.retrieve_work()))
    assert again[0] is slot  # the lowest free slot, with its lists, ACKs and jobs fetched ahead
    assert again[1].job == _job("b" * 24)  # the job fetched ahead, not a new fetch
    assert redis_db.lrange(parked.private, 0, -1) == [_job("b" * 24), _job("a" * 24)]
    fetcher.flush_acks()  # this thread holds no slot: flushes what free slots parked
    assert redis_db.lrange(parked.private, 0, -1) == [_job("b" * 24)]


def test_jobs_fetched_ahead_go_back_unrun_when_the_thread_stops(redis_db, fetcher, instant_jobs):
    """CORE-107: a job fetched after stop goes back unrun."""
    for i in range(20):
        redis_db.lpush("queue:default", _job(f"{i:024d}"))
    for _ in range(fetch_slot.PREFETCH_AFTER + 1):
        fetcher.retrieve_work().acknowledge()
    running = fetcher.retrieve_work()  # this fetch moved PREFETCH jobs
    ahead = list(fetcher._mine().ahead)
    assert len(ahead) == fetch_slot.PREFETCH - 1
    fetcher.release_thread_connection()  # the processor exits
    tail = redis_db.lrange("queue:default", -len(ahead), -1)
    assert set(tail) == {u.job for u in ahead}  # at the fetch end: next to run
    assert redis_db.lrange(running.private, 0, -1) == [running.job] or running.job in redis_db.lrange(
        running.private, 0, -1)
    assert not any(u.job in redis_db.lrange(running.private, 0, -1) for u in ahead)


def test_a_reconcile_keeps_jobs_fetched_ahead(redis_db, fetcher, instant_jobs):
    """After a fetch error the fetcher gives back jobs no thread holds: jobs fetched ahead are held."""
    for i in range(20):
        redis_db.lpush("queue:default", _job(f"{i:024d}"))
    for _ in range(fetch_slot.PREFETCH_AFTER + 1):
        fetcher.retrieve_work().acknowledge()
    fetcher.retrieve_work().acknowledge()  # a reconcile runs between two jobs of the slot
    ahead = list(fetcher._mine().ahead)
    assert ahead
    fetcher._stale()
    fetcher._reconcile(fetcher._mine())
    private = redis_db.lrange(ahead[0].private, 0, -1)
    assert all(u.job in private for u in ahead)
    assert fetcher.retrieve_work().job == ahead[0].job


def test_how_far_a_thread_fetches_ahead_follows_its_job_times(fetcher, monkeypatch):
    # About PREFETCH_AHEAD seconds of the thread's recent jobs, 2 to PREFETCH; none
    # until PREFETCH_AFTER full fetches; none once jobs take PREFETCH_MAX_GAP or more.
    now = [1000.0]
    monkeypatch.setattr(fetch_slot.time, "monotonic", lambda: now[0])
    slot = fetcher._mine()

    def after(per_job, count):
        slot._streak, slot._last, slot._brought = fetch_slot.PREFETCH_AFTER, now[0], count
        now[0] += per_job * count
        return slot.fetch_count()

    assert after(0.001, 1) == 16 == fetch_slot.PREFETCH  # 1 ms jobs: 20 ms = 16 (the cap)
    assert after(0.005, 16) == 4
    assert after(0.02, 4) == 2
    assert after(0.04, 2) == 2  # still short: at least 2
    assert after(0.06, 2) == 1  # too long to fetch ahead
    slot._streak, slot._last, slot._brought = fetch_slot.PREFETCH_AFTER - 1, now[0], 1
    now[0] += 0.001
    assert slot.fetch_count() == 1  # not warmed up


def test_empty_queues_block_on_the_first_and_flush_acks_first(redis_db, monkeypatch):
    # The polling path (no push notifications): the wait is one FETCH_POLL_INTERVAL (without
    # the short waits of a fallback fetcher's first second: tests/server/test_wake_demand.py).
    """PRO-123: empty or quiet fetch sleeps and flushes ACKs."""
    monkeypatch.setattr(wake_demand, "WINDOW", 0.0)
    fetcher = ReliableFetch(Config(QUEUES=["default", "low"], FETCH_POLL_INTERVAL=1, FETCH_NOTIFICATIONS=False))
    redis_db.lpush("queue:default", _job("a" * 24))
    unit = fetcher.retrieve_work()
    unit.acknowledge()
    started = time.monotonic()
    assert fetcher.retrieve_work() is None
    assert time.monotonic() - started >= 0.9  # BLMOVE waited FETCH_POLL_INTERVAL
    assert redis_db.llen(unit.private) == 0  # the parked ACK went out first (RUN-204)


def test_bulk_requeue_skips_jobs_acked_in_the_race(redis_db, fetcher):
    redis_db.lpush("queue:default", _job("a" * 24), _job("b" * 24))
    done = fetcher.retrieve_work()
    running = fetcher.retrieve_work()
    done.acknowledge()
    fetcher.bulk_requeue([done, running])  # PRO-135
    assert redis_db.lrange("queue:default", 0, -1) == [running.job]
    assert redis_db.llen(running.private) == 0


def test_paused_queue_is_skipped_and_the_local_pause_is_seen_at_once(redis_db, fetcher):
    redis_db.lpush("queue:default", _job("a" * 24))
    redis_db.lpush("queue:low", _job("b" * 24))
    Queue("default").pause()
    assert Queue("default").paused
    unit = fetcher.retrieve_work()
    assert unit.queue == "low"  # PRO-300
    unpause("default")  # bumps the generation: no 2 s wait in this process (PRO-301)
    assert fetcher.retrieve_work().queue == "default"


def test_with_every_queue_paused_a_fetch_sends_its_acks_and_sleeps_instead(redis_db, fetcher):
    """CORE-109: when pausing leaves no queue to fetch from, the fetch moves nothing: it
    sends the acknowledgements it held and waits a poll interval, then returns no job."""
    redis_db.lpush("queue:default", _job("a" * 24))
    unit = fetcher.retrieve_work()
    unit.acknowledge()  # parked: it would ride the next fetch's move
    redis_db.lpush("queue:default", _job("b" * 24))
    redis_db.lpush("queue:low", _job("c" * 24))
    pause("default")
    pause("low")
    try:
        assert fetcher.retrieve_work() is None
        assert redis_db.llen("queue:default") == 1 and redis_db.llen("queue:low") == 1
        assert not redis_db.exists(private_list("default"))  # the held ACK went out
    finally:
        unpause("default")
        unpause("low")


def test_quiet_sends_the_held_acks_and_fetches_nothing_more(redis_db, fetcher):
    """PRO-134 / PRO-132: quieting the fetcher (``terminate``) sets its done flag and sends the
    ACKs it held back; it is one-way: later fetches move nothing and return no job."""
    redis_db.lpush("queue:default", _job("a" * 24))
    unit = fetcher.retrieve_work()
    unit.acknowledge()
    assert redis_db.llen(unit.private) == 1  # parked
    fetcher.terminate()
    assert redis_db.llen(unit.private) == 0
    redis_db.lpush("queue:default", _job("b" * 24))
    assert fetcher.retrieve_work() is None and redis_db.llen("queue:default") == 1


def test_paused_cache_lasts_two_seconds_for_other_processes(redis_db):
    """RUN-702: the paused-set cache is read again after 2 s, and a local pause is seen at once."""
    cache = PausedCache()
    assert cache.get() == frozenset()
    redis_db.sadd("paused", "default")  # as another process would
    assert cache.get() == frozenset()
    cache._read_at -= 2.1
    assert cache.get() == {"default"}
    pause("low")
    assert cache.get() == {"default", "low"}


@pytest.mark.parametrize("key,expected", [
    ("queue:default|web.1|123|abcdef012345|0", ("queue:default", "web.1", 123, "abcdef012345")),
    ("queue:default|web.1|123|abcdef012345|17", ("queue:default", "web.1", 123, "abcdef012345")),  # slot 17
    ("queue:a|b|web|77|0", ("queue:a|b", "web", 77, None)),  # legacy shape, '|' in the name
    ("queue:default|web|x|0", None),
    ("queue:|web|1|0", None),
])
def test_parse_private_list_names(key, expected):
    assert parse_private(key) == expected  # PRO-112


def _dead_pid() -> int:
    """The pid of a process that has exited and been reaped (no fork from a threaded test)."""
    import subprocess

    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def test_reaper_recovers_every_slot_of_a_dead_process(redis_db):
    """PRO-137: the boot sweep takes no lock: it reclaims while another process holds the
    reaper's cluster lock."""
    pid = _dead_pid()
    lists = [private_list("default", pid, slot) for slot in (0, 3, 12)]
    for n, key in enumerate(lists):
        redis_db.lpush(key, _job(str(n) * 24))
    redis_db.set("super_fetch:reaper", "another process", ex=60)
    assert Reaper(["default"], grace=0).boot_sweep() == 3
    assert not any(redis_db.exists(key) for key in lists)
    assert set(redis_db.lrange("queue:default", 0, -1)) == {_job(str(n) * 24) for n in range(3)}


def test_a_dead_processs_list_in_the_legacy_shape_is_reclaimed(redis_db):
    """PRO-113: a private list named in Pro's documented shape, ``queue:<q>|<host>|<pid>|<idx>``
    (no nonce), is still judged by its host and pid and reclaimed when its process is gone."""
    legacy = f"queue:default|elsewhere|{_dead_pid()}|0"
    alive = "queue:default|elsewhere|424242|0"
    owner = "elsewhere:424242:abcdef012345"  # a live process of that host, in the heartbeat set
    redis_db.sadd("processes", owner)
    redis_db.hset(owner, mapping={"info": "{}", "beat": time.time()})
    redis_db.lpush(legacy, _job("a" * 24))
    redis_db.lpush(alive, _job("b" * 24))
    assert Reaper(["default"], grace=0).sweep(full=True) == 1
    assert not redis_db.exists(legacy) and redis_db.lrange("queue:default", 0, -1) == [_job("a" * 24)]
    assert redis_db.lrange(alive, 0, -1) == [_job("b" * 24)]  # its owner is alive: left alone


def test_the_lists_of_one_crash_go_back_spaced_as_one(redis_db):
    """A dead process's lists for one queue (one per thread) are the jobs of one crash:
    they go back spaced apart as a whole, so no two of them are fetched together again
    (drained list by list, each list's jobs would land beside the other lists' jobs)."""
    pid = _dead_pid()
    crashed = {}
    for slot in (0, 1, 2):
        for n in range(3):
            raw = _job(f"{slot}{n}".ljust(24, "x"))
            crashed[raw] = slot
            redis_db.lpush(private_list("default", pid, slot), raw)
    for i in range(200):
        redis_db.lpush("queue:default", _job(f"f{i}".ljust(24, "x")))
    assert Reaper(["default"], grace=0).boot_sweep() == 9
    queue = redis_db.lrange("queue:default", 0, -1)
    positions = sorted(i for i, raw in enumerate(queue) if raw in crashed)
    assert len(positions) == 9
    gaps = [b - a for a, b in zip(positions, positions[1:])]
    assert min(gaps) >= 9  # 9 jobs in all: each lands past the window the others were fetched in


def test_reaper_recovers_a_dead_siblings_jobs_to_the_fetch_end(redis_db):
    dead = private_list("default", _dead_pid())
    redis_db.lpush(dead, _job("a" * 24), _job("b" * 24))
    redis_db.lpush("queue:default", _job("c" * 24))
    moved = Reaper(["default"], grace=0).boot_sweep()
    assert moved == 2
    assert not redis_db.exists(dead)
    # The newest goes to the fetch end (PRO-141); the job it crashed with is spaced behind
    # other queued jobs (the far end of this short queue), so they do not run side by side again.
    assert redis_db.lrange("queue:default", 0, -1) == [_job("a" * 24), _job("c" * 24), _job("b" * 24)]
    assert redis_db.get("super_fetch:recovered:" + "a" * 24) == b"1"


def test_reaper_leaves_live_owners_alone(redis_db):
    """PRO-139: liveness from heartbeat `info`, host:pid prefix."""
    mine = private_list("default")
    redis_db.lpush(mine, _job("a" * 24))
    other = "queue:default|elsewhere|42|0123456789ab|0"
    redis_db.lpush(other, _job("b" * 24))
    redis_db.sadd("processes", "elsewhere:42:0123456789ab")
    redis_db.hset("elsewhere:42:0123456789ab", mapping={"info": "{}", "beat": time.time()})
    assert Reaper(["default"], grace=0).boot_sweep() == 0
    # Once its heartbeat hash is gone (TTL), an idle list is reclaimed.
    redis_db.delete("elsewhere:42:0123456789ab")
    assert Reaper(["default"], grace=0).sweep(full=True) == 1
    assert redis_db.lrange(mine, 0, -1) == [_job("a" * 24)]


def test_boot_grace_protects_a_fresh_list(redis_db):
    redis_db.lpush("queue:default|elsewhere|42|0123456789ab|0", _job("a" * 24))
    assert Reaper(["default"], grace=30).boot_sweep() == 0  # PRO-140


def test_third_recovery_is_a_poison_pill(redis_db):
    from django.conf import settings
    from django.test import override_settings

    died, poisoned = [], []
    registration = poison.on_poison(poisoned.append)
    handler = [lambda job, exc: died.append((job["jid"], exc))]
    try:
        with override_settings(WURK={**settings.WURK, "DEATH_HANDLERS": handler}):
            for attempt in range(3):
                redis_db.delete("queue:default")
                redis_db.lpush(private_list("default", _dead_pid()), _job("p" * 24))
                # A reaper interval passes: a job suspected again waits for its turn (issue 28 item 1).
                redis_db.delete("super_fetch:reaper:paced:default")
                Reaper(["default"], grace=0).boot_sweep()
                if attempt < 2:
                    assert redis_db.llen("queue:default") == 1
    finally:
        registration.remove()
    assert redis_db.llen("queue:default") == 0  # PRO-152: the 3rd recovery kills it
    (entry,) = redis_db.zrange("dead", 0, -1)
    job = json.loads(entry)
    assert job["error_class"] == "wurk_django.server.poison.Poisoned"
    assert "recovered 3 times" in job["error_message"]
    assert died and died[0][0] == "p" * 24 and isinstance(died[0][1], poison.Poisoned)  # PRO-153
    assert poisoned == [{"jid": "p" * 24, "klass": "tests.jobsapp.jobs.RecordJob", "count": 3, "queue": "default"}]


def test_expiring_job_gets_an_expiry_from_its_creation(redis_db):
    from tests.jobsapp.jobs import ExpiringJob

    ExpiringJob.perform_async("x")
    job = json.loads(redis_db.lindex("queue:default", 0))
    assert job["expires_in"] == 1
    assert job["expiry"] == pytest.approx(job["created_at"] / 1000 + 1)  # PRO-310


def test_a_job_moved_by_a_lost_reply_is_given_back(redis_db, fetcher):
    """RUN-604: LMOVE ran but its reply was lost; no thread holds the job, yet its
    owner is alive, so the reaper would never see it. The slot reconciles its lists
    before its next fetch: what it neither fetched ahead nor parked goes back."""
    redis_db.lpush("queue:default", _job("a" * 24), _job("b" * 24))
    done = fetcher.retrieve_work()
    done.acknowledge()  # parked, ACK not sent yet: held, kept
    orphan = _job("c" * 24)
    redis_db.lpush(done.private, orphan)  # as if an LMOVE's reply never arrived
    fetcher._stale()  # what a fetch error does
    unit = fetcher.retrieve_work()
    assert unit.job == orphan  # given back to the fetch end, and fetched again at once
    assert redis_db.lrange(done.private, 0, -1) == [orphan]  # the parked ACK went out
    assert redis_db.lrange("queue:default", 0, -1) == [_job("b" * 24)]


def test_a_lost_reply_is_reconciled_once_redis_answers_again(redis_db, fetcher, monkeypatch):
    """The fetch's commands ran but the connection broke before the reply: the fetch
    fails, and the job it moved is given back by the next one."""
    monkeypatch.setattr(reliable_fetch, "ERROR_BACKOFF", 0.0)
    redis_db.lpush("queue:default", _job("a" * 24), _job("b" * 24))
    real = reliable_fetch.send_on

    def lost(conn, commands, **options):
        real(conn, commands, **options)
        monkeypatch.setattr(reliable_fetch, "send_on", real)
        raise redis_lib.ConnectionError("connection reset (after the commands ran)")

    monkeypatch.setattr(reliable_fetch, "send_on", lost)
    assert fetcher.retrieve_work() is None
    private = private_list("default")
    assert redis_db.lrange(private, 0, -1) == [_job("a" * 24)]  # moved, and no thread holds it
    units = [fetcher.retrieve_work(), fetcher.retrieve_work()]
    assert [u.job for u in units] == [_job("a" * 24), _job("b" * 24)]  # given back, run in its turn
    assert set(redis_db.lrange(private, 0, -1)) == {_job("a" * 24), _job("b" * 24)}  # once each


def test_a_reconcile_reads_every_slot_handed_out(redis_db, fetcher):
    """After a lost reply every slot's lists are checked: this thread's and the free
    ones at once, a slot another thread holds by that thread before its next fetch
    (its job is running meanwhile, and only the holder knows what it holds)."""
    redis_db.lpush("queue:default", _job("a" * 24), _job("b" * 24))
    mine = fetcher.retrieve_work()  # slot 0
    holding, go, got = threading.Event(), threading.Event(), []

    def holder():  # slot 1: runs a job while the reconcile happens
        unit = fetcher.retrieve_work()
        got.append(unit)
        holding.set()
        go.wait(10)
        unit.acknowledge()
        got.append(fetcher.retrieve_work())
        fetcher.release_thread_connection()

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert holding.wait(10)
        _in_thread(lambda: fetcher._mine())  # slot 2: its thread exited, the slot is free
        assert fetcher._free == [2]
        lists = {n: private_list("low", slot=n) for n in (0, 1, 2)}
        orphans = {n: _job(f"o{n}".ljust(24, "x"), queue="low") for n in (0, 1, 2)}
        for n, key in lists.items():
            redis_db.lpush(key, orphans[n])  # as if moved by a command whose reply was lost
        mine.acknowledge()
        fetcher._stale()
        fetcher._reconcile(fetcher._mine())
        assert set(redis_db.lrange("queue:low", 0, -1)) == {orphans[0], orphans[2]}
        assert redis_db.lrange(lists[1], 0, -1) == [orphans[1]]  # held slot: left to its holder
        assert redis_db.lrange(mine.private, 0, -1) == [mine.job]  # parked ACK: held
        assert redis_db.lrange(got[0].private, 0, -1) == [got[0].job]  # running on slot 1
        assert fetcher._free == [2]  # back among the free ones
        go.set()
        thread.join(10)
        assert not thread.is_alive()
    finally:
        go.set()
        thread.join(10)
    fetched = got[1]
    assert fetched.private == lists[1] and fetched.job in orphans.values()
    assert not redis_db.exists(got[0].private)  # its ACK rode that fetch
    everywhere = redis_db.lrange("queue:low", 0, -1) + redis_db.lrange(lists[1], 0, -1)
    assert sorted(everywhere) == sorted(orphans.values())  # each once, nothing lost


class _CountingLock:
    """A lock that counts how often it is taken."""

    def __init__(self, lock):
        self.lock, self.taken = lock, 0

    def acquire(self, *args, **kwargs):
        self.taken += 1
        return self.lock.acquire(*args, **kwargs)

    def release(self):
        self.lock.release()

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()


def test_the_hot_path_takes_no_lock(redis_db, fetcher, monkeypatch, instant_jobs):
    """Fetch, ACK and the ACKs' ride on the next fetch, with and without fetching ahead,
    touch only the calling thread's slot: the coordinator's lock (slots, reconcile) and
    the outage log's are not taken once in 200 jobs."""
    for i in range(220):
        redis_db.lpush("queue:default", _job(f"{i:024d}"))
    fetcher.retrieve_work().acknowledge()  # takes this thread's slot
    coordinator, outage = _CountingLock(fetcher._lock), _CountingLock(fetcher._outage._lock)
    monkeypatch.setattr(fetcher, "_lock", coordinator)
    monkeypatch.setattr(fetcher._outage, "_lock", outage)
    seen = []
    for _ in range(200):
        unit = fetcher.retrieve_work()
        unit.jid = json.loads(unit.job)["jid"]
        seen.append(unit.jid)
        unit.acknowledge()
    assert (coordinator.taken, outage.taken) == (0, 0)
    assert seen == [f"{i:024d}" for i in range(1, 201)]
    assert len(fetcher._mine().ahead) > 0  # it did fetch ahead
    fetcher.flush_acks()  # not the hot path: looks at the free slots too
    assert coordinator.taken == 1


def test_an_ack_removes_one_copy_searching_from_the_oldest_end(redis_db, fetcher):
    """The ACK's LREM counts from the tail (-1), where the fetch left the oldest jobs;
    two identical payloads (a job pushed twice, byte for byte) still lose one copy per ACK."""
    same = _job("b" * 24)
    redis_db.lpush("queue:default", same, _job("a" * 24), same)
    first = fetcher.retrieve_work()
    assert first.job == same
    commands = fetch_slot.ack_commands([first])
    assert commands[0] == ("LREM", first.private, -1, same)
    newer = [fetcher.retrieve_work() for _ in range(2)]
    assert [u.job for u in newer] == [_job("a" * 24), same]
    first.acknowledge()
    fetcher.flush_acks()
    assert redis_db.lrange(first.private, 0, -1) == [same, _job("a" * 24)]
    newer[1].acknowledge()
    newer[0].acknowledge()
    fetcher.flush_acks()
    assert redis_db.llen(first.private) == 0


# -- which job was running (issue 28, item 1) --------------------------------------------------

def _marker(slot: int = 0, pid: int | None = None) -> str:
    return f"super_fetch:started:{hostname()}|{pid or os.getpid()}|{NONCE}|{slot}"


def test_each_slot_names_the_job_it_is_running(redis_db, fetcher, instant_jobs):
    """A fetch says "my oldest job is running"; a job fetched ahead says where it sits as it
    starts, so the reaper can tell it from the jobs behind it (never started) and before
    it (finished, ACK parked)."""
    for i in range(40):
        redis_db.lpush("queue:default", _job(f"{i:024d}"))
    for _ in range(fetch_slot.PREFETCH_AFTER + 1):
        fetcher.retrieve_work().acknowledge()
    first = fetcher.retrieve_work()  # this fetch moved PREFETCH jobs
    assert len(fetcher._mine().ahead) == fetch_slot.PREFETCH - 1
    assert redis_db.get(_marker()) == b"*"
    assert redis_db.lindex(first.private, -1) == first.job
    first.acknowledge()  # parked: still in the list
    for _ in range(3):
        redis_db.set(_marker(), "*")
        unit = fetcher.retrieve_work()  # fetched ahead: no round trip, the marker goes out unanswered
        marker = wait_for_value(lambda: redis_db.get(_marker()), lambda v: v != b"*")
        index, _, queue = marker.decode().partition("|")
        assert queue == "default"
        assert redis_db.lindex(unit.private, int(index)) == unit.job
        assert 0 < redis_db.ttl(_marker()) <= fetch_slot.MARK_TTL
        unit.acknowledge()
    # The replies to those unanswered writes were read with the next round trip: the
    # connection still answers in step.
    fetcher.release_thread_connection()
    assert fetcher.retrieve_work() is not None


def _warm(redis_db, fetcher, jobs: int = 40) -> None:
    for i in range(jobs):
        redis_db.lpush("queue:default", _job(f"{i:024d}"))
    for _ in range(fetch_slot.PREFETCH_AFTER + 1):
        fetcher.retrieve_work().acknowledge()


def test_a_batch_of_quick_jobs_is_marked_as_a_whole(redis_db, fetcher, instant_jobs, monkeypatch):
    """Issue 48 item 5: jobs using less processor time than QUICK, outside an exact window, are not named one
    by one as they start (that write was a fifth of a noop job's CPU): their fetch marks
    the batch "?", carries no LLEN, and the jobs it fetched ahead start with no write."""
    fetch_slot._exact_until = 0.0  # a heartbeat has read that no crash asked for exact marks
    # Every batch fetched ahead counts as quick, however slow this machine's round trips.
    monkeypatch.setattr(fetch_slot, "QUICK", fetch_slot.PREFETCH_MAX_GAP)
    _warm(redis_db, fetcher)
    first = fetcher.retrieve_work()
    slot = fetcher._mine()
    assert slot.quick and len(slot.ahead) >= 3
    assert all(unit.mark is None for unit in slot.ahead)
    assert redis_db.get(_marker()) == b"?"
    assert 0 < redis_db.ttl(_marker()) <= fetch_slot.MARK_TTL
    first.acknowledge()
    redis_db.set(_marker(), "untouched")
    for _ in range(3):
        fetcher.retrieve_work().acknowledge()  # fetched ahead: nothing written
    slot.release_connection()  # any write sent unanswered has reached Redis now
    assert redis_db.get(_marker()) == b"untouched"


def _run_batches(fetcher, jobs: int, body) -> None:
    """Take ``jobs`` jobs one after another, calling ``body`` as each one's run."""
    for _ in range(jobs):
        unit = fetcher.retrieve_work()
        body()
        unit.acknowledge()


def test_jobs_long_on_the_clock_but_cheap_in_processor_time_are_marked_by_batch(
        redis_db, fetcher, instant_jobs):
    """Issue 48 item 2: what decides a quick batch is the processor time its jobs used,
    not the clock: a job waiting on I/O (here 3 ms asleep, three times QUICK), or
    stretched by other threads holding the GIL, costs no more than its processor time,
    beside which a write per job would be dear."""
    fetch_slot._exact_until = 0.0
    for i in range(60):
        redis_db.lpush("queue:default", _job(f"{i:024d}"))
    _run_batches(fetcher, 20, lambda: time.sleep(3 * fetch_slot.QUICK))
    slot = fetcher._mine()
    assert slot.quick and slot.ahead
    assert redis_db.get(_marker()) == b"?"


def test_jobs_using_more_processor_time_than_quick_are_named_one_by_one(redis_db, fetcher, instant_jobs):
    fetch_slot._exact_until = 0.0
    for i in range(60):
        redis_db.lpush("queue:default", _job(f"{i:024d}"))

    def burn() -> None:  # twice QUICK of this thread's processor time
        until = time.thread_time() + 2 * fetch_slot.QUICK
        while time.thread_time() < until:
            pass

    _run_batches(fetcher, 20, burn)
    slot = fetcher._mine()
    assert not slot.quick and slot.ahead
    assert all(unit.mark is not None for unit in slot.ahead)
    assert redis_db.get(_marker()) != b"?"


def test_a_batch_after_a_hand_back_is_named_job_by_job(redis_db, fetcher, instant_jobs, monkeypatch):
    """A thread whose jobs fetched ahead were handed back (its job outlived its bound,
    fair.py) ran fewer jobs than it fetched: its time per job reads short, and its next
    batch is named job by job, not marked as a quick one."""
    fetch_slot._exact_until = 0.0
    monkeypatch.setattr(fetch_slot, "QUICK", fetch_slot.PREFETCH_MAX_GAP)
    _warm(redis_db, fetcher)
    first = fetcher.retrieve_work()
    slot = fetcher._mine()
    assert slot.quick and slot.ahead
    assert fetcher.hand_back(slot) >= 1
    first.acknowledge()
    fetcher.retrieve_work()
    assert not slot.quick and redis_db.get(_marker()) == b"*"


def test_an_exact_window_names_each_quick_job_again(redis_db, fetcher, instant_jobs):
    """While super_fetch:exact_marks lives (a crash named no job), each job started is
    named, however short; a process names them all until its first heartbeat too."""
    assert fetch_slot._exact_until == float("inf")  # before any heartbeat
    fetch_slot._exact_until = 0.0
    redis_db.set("super_fetch:exact_marks", "1", px=60_000)
    fetch_slot.heard_exact_window(redis_db.pttl("super_fetch:exact_marks"))
    assert fetch_slot._exact_until > time.monotonic() + 50
    _warm(redis_db, fetcher)
    first = fetcher.retrieve_work()
    slot = fetcher._mine()
    assert not slot.quick and all(unit.mark is not None for unit in slot.ahead)
    assert redis_db.get(_marker()) == b"*"
    first.acknowledge()
    unit = fetcher.retrieve_work()
    marker = wait_for_value(lambda: redis_db.get(_marker()), lambda v: v != b"*")
    assert redis_db.lindex(unit.private, int(marker.decode().partition("|")[0])) == unit.job
    # The key lapsed: the next beat says so, and quick batches go unnamed again.
    fetch_slot.heard_exact_window(-2)
    assert fetch_slot._exact_until <= time.monotonic() + 60
    fetch_slot._exact_until = 0.0
    fetch_slot.heard_exact_window(-2)
    assert fetch_slot._exact_until <= time.monotonic()
    # Set by hand with no TTL: every worker names each job until it is deleted.
    fetch_slot.heard_exact_window(-1)
    assert fetch_slot._exact_until > time.monotonic() + fetch_slot.EXACT_WINDOW - 60


def test_a_crash_in_a_quick_batch_counts_no_job_and_asks_for_exact_marks(redis_db):
    """A dead slot whose marker says "?" ran one of its jobs, not said which: all go back
    uncounted (the finished ones and those never started are innocent, and so may the
    running one be), and every worker is asked to name each job it starts for
    EXACT_WINDOW seconds, this process at once. Another slot's named job still counts."""
    fetch_slot._exact_until = 0.0
    pid = _dead_pid()
    batch = [_job(f"q{n}".ljust(24, "x")) for n in range(6)]
    named = [_job(f"n{n}".ljust(24, "x")) for n in range(2)]
    _dead_slots(redis_db, pid, {0: (batch, "?"), 1: (named, "*")})
    assert Reaper(["default"], grace=0).boot_sweep() == 8
    counted = {json.loads(raw)["jid"] for raw in batch + named
               if redis_db.exists("super_fetch:recovered:" + json.loads(raw)["jid"])}
    assert counted == {json.loads(named[0])["jid"]}
    assert sorted(redis_db.lrange("queue:default", 0, -1)) == sorted(batch + named)
    assert 0 < redis_db.ttl("super_fetch:exact_marks") <= fetch_slot.EXACT_WINDOW
    assert fetch_slot._exact_until > time.monotonic() + fetch_slot.EXACT_WINDOW - 60


def test_exact_marks_are_asked_before_the_jobs_of_a_quick_batch_go_back(redis_db, monkeypatch):
    """The reaper asks for exact marks before it puts a crash's jobs back on their queue:
    this process's fetchers run while its boot sweep does, and one fetching the pill in
    a quick batch between the two ran it unnamed once more (and the pill could end the
    process before the other workers were asked: a fifth death, once, in CI)."""
    from wurk_django.server import reaper as reaper_module

    fetch_slot._exact_until = 0.0
    seen: list[tuple[bool, int]] = []
    real = reaper_module.Writer

    class Watching(real):
        def send(self, commands, *args, **kwargs):
            seen.append((fetch_slot._exact_until > time.monotonic(), redis_db.ttl("super_fetch:exact_marks")))
            return super().send(commands, *args, **kwargs)

    monkeypatch.setattr(reaper_module, "Writer", Watching)
    pid = _dead_pid()
    batch = [_job(f"q{n}".ljust(24, "x")) for n in range(3)]
    _dead_slots(redis_db, pid, {0: (batch, "?")})
    assert Reaper(["default"], grace=0).boot_sweep() == 3
    assert seen and all(exact and ttl > 0 for exact, ttl in seen), seen
    assert sorted(redis_db.lrange("queue:default", 0, -1)) == sorted(batch)


def wait_for_value(read, good, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if value is not None and good(value):
            return value
        assert time.monotonic() < deadline, f"last value {value!r}"
        time.sleep(0.01)


def _dead_slots(redis_db, pid: int, slots: dict[int, tuple[list[bytes], str | None]]) -> None:
    """Private lists of a dead process: slot -> (jobs, oldest first; its marker or None)."""
    for slot, (jobs, marker) in slots.items():
        for raw in jobs:
            redis_db.lpush(private_list("default", pid, slot), raw)
        if marker is not None:
            redis_db.set(_marker(slot, pid), marker)


def test_the_reaper_counts_only_the_jobs_that_were_running(redis_db):
    """Of a dead process's jobs, only the one each slot named as running counts a crash; the
    jobs fetched ahead (never started) and those finished with their ACK parked go back
    uncounted. A slot with no marker (a Sidekiq Pro list) counts every job, as Pro does."""
    pid = _dead_pid()
    ahead = [_job(f"a{n}".ljust(24, "x")) for n in range(5)]  # oldest first: a0, a1 done; a2 running
    oldest = [_job(f"b{n}".ljust(24, "x")) for n in range(3)]  # b0 running (the fetch's own)
    bare = [_job(f"c{n}".ljust(24, "x")) for n in range(2)]
    _dead_slots(redis_db, pid, {0: (ahead, "2|default"), 1: (oldest, "*"), 2: (bare, None),
                                3: ([_job("d".ljust(24, "x"))], "0|low")})
    assert Reaper(["default"], grace=0).boot_sweep() == 11
    counted = {raw for raw in ahead + oldest + bare + [_job("d".ljust(24, "x"))]
               if redis_db.exists("super_fetch:recovered:" + json.loads(raw)["jid"])}
    assert counted == {ahead[2], oldest[0], *bare}
    # A death with jobs running: every worker names each job for a while (issue 48 item 5),
    # so a pill among short jobs is named at its next deaths.
    assert 0 < redis_db.ttl("super_fetch:exact_marks") <= fetch_slot.EXACT_WINDOW
    queue = redis_db.lrange("queue:default", 0, -1)
    assert sorted(queue) == sorted(ahead + oldest + bare + [_job("d".ljust(24, "x"))])
    assert not redis_db.keys("queue:default|*")


def test_a_job_suspected_again_goes_back_alone(redis_db, monkeypatch):
    """A job that was running in an earlier crash too waits in the dead process's held list
    and goes back on its own, one per reaper interval, the most recovered first: the pill
    cannot take the same neighbours down with it again, even on an empty queue."""
    monkeypatch.setattr(poison, "RECOVERY_THRESHOLD", 10)
    pid = _dead_pid()
    once, twice, fresh = (_job(name.ljust(24, "x")) for name in ("once", "twice", "fresh"))
    redis_db.set("super_fetch:recovered:" + "once".ljust(24, "x"), 1)
    redis_db.set("super_fetch:recovered:" + "twice".ljust(24, "x"), 2)
    _dead_slots(redis_db, pid, {0: ([once], "*"), 1: ([twice], "*"), 2: ([fresh], "*")})
    reaper = Reaper(["default"], interval=60, grace=0)
    held = f"queue:default|{hostname()}|{pid}|{NONCE}|1000000"
    assert reaper.boot_sweep() == 2  # the fresh suspect, and one suspected before
    assert set(redis_db.lrange("queue:default", 0, -1)) == {fresh, twice}
    assert redis_db.lrange(held, 0, -1) == [once]
    assert redis_db.get("super_fetch:recovered:" + "twice".ljust(24, "x")) == b"3"
    assert reaper.boot_sweep() == 0  # not before the next interval
    redis_db.delete("super_fetch:reaper:paced:default")
    assert reaper.boot_sweep() == 1
    assert not redis_db.exists(held)
    assert redis_db.get("super_fetch:recovered:" + "once".ljust(24, "x")) == b"2"


@pytest.mark.parametrize("handed_back_first", [True, False])
def test_a_hand_back_beside_a_start_leaves_the_running_job_named(redis_db, fetcher, instant_jobs, handed_back_first):
    """The fair watcher hands back the jobs a thread holds ahead while that thread starts
    the next one (the thread took it from the deque first): whichever of the two writes
    reaches Redis first, the marker names the job that runs, so its crash counts. The
    marker used to count from the newest end, which the hand-back shortens: the job
    started beside a hand-back was then named by a place past the list's end, and a
    poison pill's death went uncounted (a fourth worker killed in CI)."""
    _warm(redis_db, fetcher)
    first = fetcher.retrieve_work()  # this fetch moved several jobs; the first runs
    slot = fetcher._mine()
    assert len(slot.ahead) >= 2
    first.acknowledge()  # parked: still in the list
    unit = slot.next_ahead()  # the thread starts the next one...
    if handed_back_first:
        assert fetcher.hand_back(slot) >= 1  # ...the watcher hands back the rest first
        slot.mark_started(unit)
    else:
        slot.mark_started(unit)
        assert fetcher.hand_back(slot) >= 1
    slot.release_connection()  # the marker's reply read: Redis ran it
    assert redis_db.lrange(unit.private, 0, -1) == [unit.job, first.job]
    # The process dies now: the reaper counts the running job, and it only.
    parsed = parse_private(unit.private)
    assert parsed is not None
    moved = Reaper(["default"], grace=0)._recover(redis_db, parsed, {unit.private})
    assert moved == 2
    jid = json.loads(unit.job)["jid"]
    counted = [key.decode() for key in redis_db.keys("super_fetch:recovered:*")]
    assert counted == [f"super_fetch:recovered:{jid}"]


def test_a_fetch_waits_for_the_hand_back_of_the_jobs_taken_from_it(redis_db, fetcher, instant_jobs, monkeypatch):
    """The fair watcher took every job a thread held ahead and its script has not reached
    Redis yet; the thread, out of jobs, fetches again. Its fetch waits for that script: had
    it gone first, its LLEN would count the jobs about to leave, and each job it fetched
    ahead would be named by a place that the hand-back then shifts (a poison pill among
    2 ms jobs went unnamed at its death under load, and a fourth worker died)."""
    monkeypatch.setattr(fetch_slot, "PREFETCH_MAX_GAP", 3600.0)  # the wait below is no long job
    _warm(redis_db, fetcher, jobs=60)
    first = fetcher.retrieve_work()  # this fetch moved several jobs; the first runs
    slot = fetcher._mine()
    assert len(slot.ahead) >= 2
    first.acknowledge()

    # The watcher's hand-back, held between taking the jobs and sending its script.
    taken = threading.Event()
    go = threading.Event()
    real_writer = reliable_fetch.Writer

    class HeldWriter:
        def __init__(self, *args, **kwargs):
            self.writer = real_writer(*args, **kwargs)

        def send(self, commands):
            taken.set()
            go.wait(30)
            return self.writer.send(commands)

    monkeypatch.setattr(reliable_fetch, "Writer", HeldWriter)
    watcher = threading.Thread(target=fetcher.hand_back, args=(slot,))
    watcher.start()
    assert taken.wait(30)
    fetched: list = []
    def fetch() -> None:
        fetcher._local.slot = slot  # the thread that holds the slot fetches again
        fetched.append(fetcher.retrieve_work())

    thread = threading.Thread(target=fetch)
    thread.start()
    thread.join(1)  # the fetch goes first if nothing holds it back (not asserted: a slow machine may lag)
    go.set()
    watcher.join(30)
    thread.join(30)
    monkeypatch.setattr(reliable_fetch, "Writer", real_writer)
    unit = fetched[0]
    assert unit is not None and len(slot.ahead) >= 1
    # Each job fetched ahead is named by its place as the list now is: the marker it writes
    # when it starts names it, so its crash would count it and no other job.
    for ahead in list(slot.ahead):
        index, _, queue = ahead.mark.partition("|")
        assert queue == "default"
        assert redis_db.lindex(ahead.private, int(index)) == ahead.job
    # The first job of the fetch is the oldest in the list (the ACK of the one before rode
    # the fetch), as its marker "*" says.
    assert redis_db.lindex(unit.private, -1) == unit.job and redis_db.get(_marker()) == b"*"
    slot.release_connection()


def test_jobs_fetched_ahead_are_named_past_a_stray_job_and_after_its_reconcile(redis_db, fetcher, instant_jobs):
    """A job left in the private list (a lost reply) sits on the oldest side of a fetch:
    the jobs fetched ahead are named by their places counted past it, and once a
    reconcile gives it back, by their new places."""
    for i in range(40):
        redis_db.lpush("queue:default", _job(f"{i:024d}"))
    for _ in range(fetch_slot.PREFETCH_AFTER + 1):
        fetcher.retrieve_work().acknowledge()
    slot = fetcher._mine()
    public, private = slot.keys("default")
    stray = _job("stray".ljust(24, "x"))
    redis_db.rpush(private, stray)  # moved by a command whose reply was lost
    first = fetcher.retrieve_work()
    assert len(slot.ahead) >= 2
    first.acknowledge()

    def named(unit) -> bytes:
        index, _, queue = unit.mark.partition("|")
        assert queue == "default"
        return redis_db.lindex(private, int(index))

    assert [named(unit) for unit in slot.ahead] == [unit.job for unit in slot.ahead]
    fetcher._stale()
    fetcher._reconcile(slot)
    assert stray in redis_db.lrange(public, 0, -1)
    assert [named(unit) for unit in slot.ahead] == [unit.job for unit in slot.ahead]


def test_pro_132_a_failed_flush_keeps_the_acks_and_bulk_requeue_flushes_first(redis_db, fetcher, monkeypatch):
    """PRO-132: a flush that fails puts the held ACKs back and raises; the next flush sends
    them. Bulk requeue flushes first: a job that finished, its ACK still held, is not
    requeued to run again."""
    redis_db.lpush("queue:default", _job("a" * 24), _job("b" * 24))
    done = fetcher.retrieve_work()
    done.acknowledge()  # held back
    original = reliable_fetch.send_commands

    def down(*args, **kwargs):
        raise redis_lib.ConnectionError("Redis went away")

    monkeypatch.setattr(reliable_fetch, "send_commands", down)
    with pytest.raises(redis_lib.ConnectionError):
        fetcher.flush_acks()
    assert redis_db.lrange(done.private, 0, -1) == [done.job]  # not acknowledged yet
    monkeypatch.setattr(reliable_fetch, "send_commands", original)
    fetcher.flush_acks()
    assert redis_db.llen(done.private) == 0

    running = fetcher.retrieve_work()
    running.acknowledge()  # finished just before the hard shutdown, its ACK held
    fetcher.bulk_requeue([running])
    assert redis_db.llen("queue:default") == 0 and redis_db.llen(running.private) == 0
