"""Pushes that poll the socket for their reply (``PUSH_SPIN_US``, wire.exchange's
``spin``) against real topologies: a Sentinel-managed primary that moves (``SENTINEL
FAILOVER``) or dies (SIGKILL) in the middle of a series of pushes, and a second shard
reached with ``via()``.

Polling is forced on in this process (a worker run in-process earlier in the session
switches it off for good) and every test checks that pushes did poll: polling reads
``wire.perf_counter`` to know when to stop, and nothing else in ``exchange()`` reads it,
so a push that polled read it at least once. ``PUSH_SPIN_US`` is the most it may be
(10 ms), so that a reply late on a busy machine rarely makes a connection skip polling.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest
import redis as redis_lib

from tests.redis_servers import SentinelGroup, TCPRedis, replicating
from tests.support import wait_for, wurk_settings
from wurk_django import Job, payload, via
from wurk_django.client import reliable_push
from wurk_django.redis import wire

SPIN_US = 10_000
DB = 1


class PolledJob(Job):
    def perform(self, *args):
        pass


def _skip_without_the_fast_path() -> None:
    if not wire.enabled():
        pytest.skip("the fast path is off (WURK_FAST_PATH=0): redis-py's own calls never poll")


@pytest.fixture
def polls(monkeypatch):
    """Polling allowed; one ``(port, spin, clock reads)`` per wire.exchange call (the
    clock reads counted per thread: the push buffer's delivery thread pushes too)."""
    _skip_without_the_fast_path()
    monkeypatch.setattr(wire, "_spin_allowed", True)
    reads = threading.local()
    calls: list[tuple[int | None, float, int]] = []
    real_clock, real_exchange = wire.perf_counter, wire.exchange

    def clock() -> float:
        reads.n = getattr(reads, "n", 0) + 1
        return real_clock()

    def exchange(conn, commands, hold_gil=False, spin=0.0):
        reads.n = 0
        try:
            return real_exchange(conn, commands, hold_gil, spin)
        finally:
            calls.append((getattr(conn, "port", None), spin, reads.n))

    monkeypatch.setattr(wire, "perf_counter", clock)
    monkeypatch.setattr(wire, "exchange", exchange)
    return calls


def _polled_on(calls: list[tuple[int | None, float, int]], port: int) -> int:
    return sum(1 for p, _spin, reads in calls if p == port and reads)


def _jids(client: redis_lib.Redis, queue: str) -> Counter:
    return Counter(payload.loads(raw)["jid"] for raw in client.lrange(f"queue:{queue}", 0, -1))


# -- a Sentinel-managed primary that moves or dies between two pushes ---------------------------

@pytest.fixture(scope="module")
def group():
    _skip_without_the_fast_path()  # before the servers start
    started = SentinelGroup().start()
    yield started
    started.stop()


def _listening(group: SentinelGroup) -> bool:
    """Every sentinel has this process's watcher subscribed (the last thing it
    subscribes is the abort pattern): a failover's first announcement is heard."""
    for port in group.sentinel_ports:
        client = redis_lib.Redis(port=port, decode_responses=True)
        try:
            if not any(int(c.get("psub", 0)) for c in client.client_list()):
                return False
        finally:
            client.close()
    return True


@pytest.fixture
def drained_by_pushes():
    """No push of an earlier test is still buffered or being delivered: the jobs this
    test buffers through the switch are its own, delivered by the pushes that follow
    and by the buffer's delivery thread, one drain at a time."""
    wait_for(lambda: reliable_push.buffered() == 0
             and not [t for t in threading.enumerate() if t.name == "wurk-push-buffer"],
             timeout=15, message="no push buffered or being delivered from an earlier test")


@pytest.mark.parametrize("how", ["failover", "crash"])
def test_pushes_polled_for_follow_a_primary_that_moves_or_dies(group, polls, drained_by_pushes, how):
    """30 pushes, then the primary moves (``SENTINEL FAILOVER``) or is killed; pushes go
    on through the switch and 30 more after it. Every job is on the new primary's queue
    exactly once, and pushes polled for their reply on the old primary and on the new."""
    queue = f"polled-{how}"
    old_port = group.master_port()
    wait_for(lambda: all(replicating(s.port, old_port) for s in group.servers if s.port != old_port),
             timeout=30, message="every replica to follow the primary")
    old = redis_lib.Redis(port=old_port, db=DB)
    old.delete(f"queue:{queue}")
    pushed: list[str] = []
    redis_setting = {"SENTINELS": group.addresses, "SERVICE": group.service, "OPTIONS": {"db": DB}}
    try:
        with wurk_settings(REDIS=redis_setting, PUSH_SPIN_US=SPIN_US):
            def push() -> None:
                pushed.append(PolledJob.set(queue=queue).perform_async(len(pushed)))

            push()  # builds the pool, which starts this process's sentinel watchers
            wait_for(lambda: _listening(group), timeout=15, message="the watchers to subscribe")
            for _ in range(29):
                push()
            assert _jids(old, queue) == Counter(pushed)
            if how == "crash":
                # Everything pushed so far is on every replica (replication is asynchronous:
                # without this a SIGKILL may lose the last writes, whatever the client does).
                assert old.execute_command("WAIT", len(group.replicas), 10_000) == len(group.replicas)
                group.crash(old_port)
            else:
                group.failover()

            def switched() -> bool:
                push()
                return group.master_port() != old_port

            wait_for(switched, timeout=30, interval=0.02, message="the sentinels to switch")
            new_port = group.master_port()
            if how == "crash":
                group.restart_as_replica(old_port, new_port)
            for _ in range(30):
                push()
            # Everything buffered during the switch is delivered. Not always by the next push:
            # just after a crash the sentinels can name no usable primary for a moment (a CI
            # run saw 30 pushes in a row buffered then), and the buffer's thread delivers later.
            wait_for(lambda: reliable_push.buffered() == 0, timeout=20,
                     message="the pushes buffered during the switch to be delivered")
        if how == "failover":
            # What the sentinels do about 10 s later; the next test needs every replica to
            # follow the new primary.
            old.execute_command("REPLICAOF", "127.0.0.1", str(new_port))
        new = redis_lib.Redis(port=new_port, db=DB)
        try:
            assert new.info("replication")["role"] == "master"
            on_new = _jids(new, queue)
            new.delete(f"queue:{queue}")
        finally:
            new.close()
    finally:
        old.close()
    assert sorted(set(pushed) - set(on_new)) == [], "pushes lost"
    assert sorted(j for j, n in on_new.items() if n > 1) == [], "pushes written twice"
    assert on_new == Counter(pushed)
    assert {spin for _port, spin, _reads in polls} == {SPIN_US * 1e-6}
    assert _polled_on(polls, old_port) >= 1 and _polled_on(polls, new_port) >= 1, polls
    # A reply later than 10 ms makes the next round trip (more after misses in a row) skip
    # polling; every other push polls.
    assert _polled_on(polls, old_port) + _polled_on(polls, new_port) >= len(pushed) // 2, polls


# -- a second shard ------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def shard_servers():
    _skip_without_the_fast_path()
    a, b = TCPRedis().start(), TCPRedis().start()
    yield a, b
    a.stop()
    b.stop()


def test_pushes_polled_for_under_via_land_on_that_shard(shard_servers, polls, redis_db):
    """40 pushes under ``via("b")`` with shards a and b configured: each polled for its
    reply on shard b's connection, all 40 are on shard b once, and nothing at all was
    written to shard a or to the default Redis."""
    a, b = shard_servers
    on_a, on_b = a.client(DB), b.client(DB)
    queue = "polled-shard"
    try:
        with wurk_settings(SHARDS={"a": a.url(DB), "b": b.url(DB)}, PUSH_SPIN_US=SPIN_US):
            with via("b"):
                pushed = [PolledJob.set(queue=queue).perform_async(i) for i in range(40)]
        assert _jids(on_b, queue) == Counter(pushed)
        assert on_a.dbsize() == 0  # nothing at all went to shard a
        assert redis_db.llen(f"queue:{queue}") == 0
    finally:
        on_a.close()
        on_b.close()
    assert {(port, spin) for port, spin, _reads in polls} == {(b.port, SPIN_US * 1e-6)}
    assert _polled_on(polls, b.port) >= len(pushed) // 2, polls
