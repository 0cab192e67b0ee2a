"""The cluster fetch's rules for faults (issue 46 item 4), one at a time, in this process on
the session's real Redis Cluster: a command that failed without a reply, a queue whose
primary fails while the others work, an ACK through a fault, and the reaper skipping
what it cannot reach. The faults themselves, with real worker processes, are in
test_cluster_faults.py."""

from __future__ import annotations

import threading

import pytest
import redis as redis_lib

from tests.topologies.cluster_client import cluster_settings
from wurk_django import context, payload
from wurk_django.client.writer import Writer
from wurk_django.redis.cluster_layout import CLUSTER
from wurk_django.server import cluster_reaper
from wurk_django.server.fetch import cluster as fetch_cluster
from wurk_django.server.fetch.cluster import ClusterFetch


@pytest.fixture
def on_cluster(redis_cluster):
    with cluster_settings(redis_cluster, QUEUES=["q0", "q1", "q2", "q3"]) as client:
        yield client


def _push(queue: str, jid: str) -> None:
    Writer().write([{"class": "Nothing", "args": [], "queue": queue, "jid": jid}])


class Faulty:
    """The fetcher's cluster client, with faults on demand: ``lost[queue]`` runs the next
    fetch (the fetch script, or ``BLMOVE``) from that queue and then raises as if its reply
    was lost; ``down`` names queues whose commands raise without running; ``acks_failing``
    makes that many fetch scripts carrying ACKs raise ``TRYAGAIN`` first."""

    def __init__(self, real) -> None:
        self.real = real
        self.lost: set[str] = set()
        self.down: set[str] = set()
        self.acks_failing = 0
        self.broken: set[str] = set()
        self.calls: list[str] = []

    def _queue_of(self, key: str) -> str:
        return key[3:key.index("}")]

    def _move(self, command: str, source: str, *args):
        queue = self._queue_of(source)
        self.calls.append(f"{command} {queue}")
        if queue in self.down:
            raise redis_lib.ConnectionError(f"primary of {queue} down")
        result = self._run(command, source, *args)
        if queue in self.lost:
            self.lost.discard(queue)
            raise redis_lib.ConnectionError("the connection closed before the reply")
        if queue in self.broken:
            self.broken.discard(queue)
            # What redis-py 5.3's cluster client raised once mid-reshard, the command sent.
            raise AttributeError("'NoneType' object has no attribute 'feed'")
        return result

    def blmove(self, source, *args):
        return self._move("blmove", source, *args)

    def evalsha(self, sha, numkeys, *keys_and_args):
        if sha != fetch_cluster.FETCH.sha:
            return self.real.evalsha(sha, numkeys, *keys_and_args)
        acks = keys_and_args[numkeys + 2:]
        if acks and self.acks_failing:
            self.acks_failing -= 1
            raise redis_lib.exceptions.TryAgainError("TRYAGAIN Multiple keys request during rehashing of slot")
        return self._move("evalsha", keys_and_args[0], numkeys, *keys_and_args)

    def _run(self, command: str, source: str, *args):
        if command == "evalsha":
            return self.real.evalsha(fetch_cluster.FETCH.sha, *args)
        return getattr(self.real, command)(source, *args)

    def __getattr__(self, name):
        return getattr(self.real, name)


def _fetcher(on_cluster) -> tuple[ClusterFetch, Faulty]:
    faulty = Faulty(on_cluster)
    return ClusterFetch(context.config(), client=faulty), faulty


def test_a_job_moved_by_a_fetch_whose_reply_was_lost_goes_back_at_the_next_fetch(on_cluster, monkeypatch):
    monkeypatch.setattr(fetch_cluster, "ERROR_BACKOFF", 0.05)
    fetcher, faulty = _fetcher(on_cluster)
    _push("q1", "orphan")
    faulty.lost.add("q1")
    assert fetcher.retrieve_work() is None  # the LMOVE ran; its reply "never came"
    private = fetcher.private_list("q1", 0)
    assert on_cluster.llen(private) == 1 and on_cluster.llen(CLUSTER.queue("q1")) == 0
    unit = wait_for_unit(fetcher)
    # Swept back onto the queue before the next fetch from it, then fetched: not stranded.
    assert payload.loads(unit.job)["jid"] == "orphan"
    assert on_cluster.lrange(private, 0, -1) == [unit.job]
    unit.acknowledge()
    fetcher.flush_acks()
    assert on_cluster.exists(private) == 0 and on_cluster.llen(CLUSTER.queue("q1")) == 0


def test_a_fetch_that_fails_any_other_way_keeps_its_acks_and_sweeps_its_list(on_cluster, monkeypatch):
    monkeypatch.setattr(fetch_cluster, "ERROR_BACKOFF", 0.05)
    fetcher, faulty = _fetcher(on_cluster)
    _push("q2", "first")
    first = fetcher.retrieve_work()
    first.acknowledge()  # parked: it rides the next fetch from q2
    _push("q2", "second")
    faulty.broken.add("q2")  # the script runs (the ACK, the move), then the client fails
    assert fetcher.retrieve_work() is None
    assert [payload.loads(raw)["jid"] for raw in on_cluster.lrange(first.private, 0, -1)] == ["second"]
    unit = wait_for_unit(fetcher)
    # Swept back and fetched again, not stranded in a live process's list.
    assert payload.loads(unit.job)["jid"] == "second"
    assert on_cluster.lrange(first.private, 0, -1) == [unit.job]
    unit.acknowledge()
    fetcher.flush_acks()
    assert on_cluster.exists(first.private) == 0


def wait_for_unit(fetcher: ClusterFetch, tries: int = 20):
    for _ in range(tries):
        unit = fetcher.retrieve_work()
        if unit is not None:
            return unit
    raise AssertionError("no job fetched")


def test_a_queue_whose_primary_fails_rests_while_the_others_are_fetched(on_cluster):
    fetcher, faulty = _fetcher(on_cluster)
    faulty.down.add("q0")
    _push("q0", "stuck")
    _push("q2", "free")
    unit = fetcher.retrieve_work()
    # Before issue 46 item 4 the first queue's error ended the whole fetch, every thread
    # stood still for the backoff, and q2 waited for q0's primary.
    assert unit is not None and payload.loads(unit.job)["jid"] == "free"
    unit.acknowledge()
    faulty.calls.clear()
    assert fetcher.retrieve_work() is None  # q0 rests: not asked again within ERROR_BACKOFF
    assert not [call for call in faulty.calls if call.endswith(" q0")]
    faulty.down.clear()
    fetcher._resting.clear()  # the backoff is over
    unit = fetcher.retrieve_work()
    assert unit is not None and payload.loads(unit.job)["jid"] == "stuck"
    # A connection error says nothing of whether the command ran: the list was swept first (empty).
    assert on_cluster.lrange(unit.private, 0, -1) == [unit.job]


def test_parked_acks_ride_the_next_fetch_again_after_a_fault(on_cluster):
    fetcher, faulty = _fetcher(on_cluster)
    _push("q3", "acked")
    unit = fetcher.retrieve_work()
    unit.acknowledge()  # parked in this thread's slot
    _push("q3", "next")
    faulty.acks_failing = 1
    assert fetcher.retrieve_work() is None  # the fetch carrying the ACK was refused: q3 rests
    assert on_cluster.lrange(unit.private, 0, -1) == [unit.job]  # not acknowledged, not lost
    fetcher._resting.clear()  # the backoff is over
    again = fetcher.retrieve_work()
    assert payload.loads(again.job)["jid"] == "next"
    assert on_cluster.lrange(unit.private, 0, -1) == [again.job]  # the parked ACK rode this fetch


def test_a_thread_flushing_its_acks_tries_again_through_a_fault(on_cluster):
    fetcher, faulty = _fetcher(on_cluster)
    _push("q3", "acked")
    unit = fetcher.retrieve_work()
    unit.acknowledge()
    faulty.acks_failing = 3
    fetcher.flush_acks()  # a processor exiting: waits out the fault
    assert faulty.acks_failing == 0 and on_cluster.exists(unit.private) == 0


def test_an_ack_from_another_thread_goes_out_at_once_and_tries_again_through_a_fault(on_cluster):
    fetcher, faulty = _fetcher(on_cluster)
    _push("q3", "acked")
    unit = fetcher.retrieve_work()
    faulty.acks_failing = 3
    other = threading.Thread(target=unit.acknowledge)  # e.g. the settlement of an abandoned run
    other.start()
    other.join(30)
    assert faulty.acks_failing == 0 and on_cluster.exists(unit.private) == 0


def test_an_ack_that_gives_up_raises_a_connection_error_so_the_job_goes_back(on_cluster, monkeypatch):
    monkeypatch.setattr(fetch_cluster, "ACK_PATIENCE", 0.3)
    fetcher, faulty = _fetcher(on_cluster)
    _push("q3", "given-back")
    unit = fetcher.retrieve_work()
    faulty.acks_failing = 100
    with pytest.raises(redis_lib.ConnectionError, match="could not acknowledge"):
        unit.send_ack()
    assert unit.private in fetcher._unsure
    unit.requeue()  # what the processor does with a connection error: the job goes back, once
    assert on_cluster.lrange(CLUSTER.queue("q3"), 0, -1) == [unit.job]


def test_an_ack_refused_for_another_reason_raises_at_once(on_cluster):
    fetcher, _ = _fetcher(on_cluster)
    _push("q3", "wrong")
    unit = fetcher.retrieve_work()
    on_cluster.delete(unit.private)
    on_cluster.set(unit.private, "not a list")
    with pytest.raises(redis_lib.ResponseError, match="WRONGTYPE"):
        unit.send_ack()


def test_the_reaper_skips_a_primary_it_cannot_scan_and_sweeps_the_others(on_cluster, monkeypatch):
    private = CLUSTER.private_queue("q2", "gone-host", 1, "n0", 0)
    on_cluster.rpush(private, b"job")
    primaries = on_cluster.get_primaries()
    holder = on_cluster.get_node_from_key(private)
    real = on_cluster.get_redis_connection

    class Down:
        """A primary's client whose SCAN fails (the cluster client's own commands go through)."""

        def __init__(self, client) -> None:
            self.client = client

        def scan_iter(self, **_):
            raise redis_lib.ConnectionError("primary killed")
            yield  # a generator, like redis-py's

        def __getattr__(self, name):
            return getattr(self.client, name)

    def connection(node):
        return real(node) if node.name == holder.name else Down(real(node))

    monkeypatch.setattr(on_cluster, "get_redis_connection", connection)
    assert len(primaries) == 3
    assert cluster_reaper.recover(on_cluster) == 1  # the two others failed; this one swept
    assert on_cluster.lrange(CLUSTER.queue("q2"), 0, -1) == [b"job"]
