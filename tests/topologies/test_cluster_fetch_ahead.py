"""The cluster worker's fetch ahead and batched ACKs (issue 46; wurk_django/server/fetch/cluster.py):
several jobs of a queue per round trip into the thread's private list, their ACKs riding the
thread's next fetch from that queue, and what a kill -9 leaves: nothing lost, the jobs
fetched ahead and not started back and run once. In this process on the session's real
cluster (the commands counted by a counting client and by the node's own counters), and
with real worker processes for the kill."""

from __future__ import annotations

import time

import pytest
import redis as redis_lib

from tests.jobsapp.cluster_jobs import ClusterSlowJob
from tests.support import wait_for
from tests.topologies.cluster_client import cluster_settings, ran, worker_env
from wurk_django import context, payload
from wurk_django.client.writer import Writer
from wurk_django.redis.cluster_layout import CLUSTER
from wurk_django.server.fetch import cluster as fetch_cluster
from wurk_django.server.fetch import fair
from wurk_django.server.fetch.cluster import ClusterFetch

WAIT = 90.0  # generous: the machine is shared; nothing here asserts a duration


@pytest.fixture
def on_cluster(redis_cluster):
    with cluster_settings(redis_cluster, QUEUES=["q0", "q1"]) as client:
        yield client


class Counting:
    """The fetcher's cluster client, counting what it sends: ``calls`` names each command
    (the fetch script as ``fetch``), ``acks`` how many ACKs each fetch script carried,
    ``moves`` how many jobs each asked for."""

    def __init__(self, real) -> None:
        self.real = real
        self.calls: list[str] = []
        self.acks: list[int] = []
        self.moves: list[int] = []

    def evalsha(self, sha, numkeys, *keys_and_args):
        if sha == fetch_cluster.FETCH.sha:
            self.calls.append("fetch")
            args = keys_and_args[numkeys:]
            self.moves.append(int(args[0]))
            self.acks.append(len(args) - 2)
        else:
            self.calls.append(f"evalsha {sha[:8]}")
        return self.real.evalsha(sha, numkeys, *keys_and_args)

    def __getattr__(self, name):
        attr = getattr(self.real, name)
        if callable(attr) and name in ("lmove", "blmove", "lrem", "rpush", "lpush"):
            def counted(*args, **kwargs):
                self.calls.append(name)
                return attr(*args, **kwargs)
            return counted
        return attr


def _push(queue: str, count: int, prefix: str = "j") -> list[str]:
    jids = [f"{prefix}{n}" for n in range(count)]
    Writer().write([{"class": "Nothing", "args": [], "queue": queue, "jid": jid} for jid in jids])
    return jids


def _evalsha_calls(client, key: str) -> int:
    node = client.get_node_from_key(key)
    stats = client.get_redis_connection(node).info("commandstats")
    return int(stats.get("cmdstat_evalsha", {}).get("calls", 0))


def _unwatched(fetcher: ClusterFetch) -> ClusterFetch:
    """No fair watcher thread: the test holds a job as long as it likes, and looks itself."""
    fetcher._fair.holding = lambda: None
    return fetcher


def _drain(fetcher: ClusterFetch, until: int) -> list[str]:
    """Run (fetch, then acknowledge at once) until ``until`` jobs ran: jobs of no time."""
    seen: list[str] = []
    deadline = time.monotonic() + WAIT
    while len(seen) < until and time.monotonic() < deadline:
        unit = fetcher.retrieve_work()
        if unit is not None:
            seen.append(payload.loads(unit.job)["jid"])
            unit.acknowledge()
    return seen


def test_a_thread_of_short_jobs_fetches_several_jobs_per_round_trip_and_acks_them_together(on_cluster):
    counting = Counting(on_cluster)
    fetcher = _unwatched(ClusterFetch(context.config(), client=counting))
    queued = _push("q0", 96)
    # The script loaded on the queue's node first (a NOSCRIPT reply would count one more call there).
    fetch_cluster.FETCH(on_cluster, keys=["{q:q0}:nothing", CLUSTER.queue("q0")], args=[0, 0])
    before = _evalsha_calls(on_cluster, CLUSTER.queue("q0"))

    seen = _drain(fetcher, len(queued))
    fetcher.flush_acks()

    assert sorted(seen) == sorted(queued)  # each once
    fetches = counting.calls.count("fetch")
    # Fetches of one job start the streak, then about 16 a fetch (FETCH_SIZE): far fewer
    # round trips than jobs (the worker before this change sent 2 a job: LMOVE, then LREM).
    assert fetches <= len(queued) // 4, counting.calls
    assert max(counting.moves) == fetch_cluster.PREFETCH
    # The ACKs rode the fetches (several in one script), and none went alone as an LREM.
    assert "lrem" not in counting.calls and "lmove" not in counting.calls
    assert max(counting.acks) >= 8
    assert sum(counting.acks) == len(queued)
    # The node saw the same: one EVALSHA per round trip, not two commands a job.
    assert _evalsha_calls(on_cluster, CLUSTER.queue("q0")) - before == fetches
    assert [call for call in counting.calls if call != "fetch"] == []  # nothing else was sent
    assert not list(on_cluster.scan_iter(match="{q:*}:private|*", target_nodes=on_cluster.PRIMARIES))


def test_jobs_fetched_ahead_wait_in_the_private_list_and_run_next_without_a_round_trip(on_cluster):
    counting = Counting(on_cluster)
    fetcher = _unwatched(ClusterFetch(context.config(), client=counting))
    _push("q1", 40)
    _drain(fetcher, 3)  # the streak: fetches of one job until two in a row were full and quick
    unit = fetcher.retrieve_work()
    held = fetcher.in_hand()
    assert held >= 2  # the third fetch brought several: one runs, the rest wait in the slot
    # The first jobs' ACKs rode the fetches after them: the list holds this fetch's jobs.
    assert on_cluster.llen(unit.private) == held + 1
    sent = len(counting.calls)
    unit.acknowledge()
    nxt = fetcher.retrieve_work()
    assert len(counting.calls) == sent  # taken from the slot: no command
    assert nxt.private == unit.private and fetcher.in_hand() == held - 1


def test_jobs_fetched_ahead_behind_a_long_job_go_back_to_their_queue(on_cluster):
    fetcher = _unwatched(ClusterFetch(context.config()))
    _push("q0", 40)
    _drain(fetcher, 3)
    unit = fetcher.retrieve_work()
    held = fetcher.in_hand()
    assert held >= 2
    slot = unit.slot
    slot.started = time.monotonic() - 10 * fair.BOUND  # its current job runs long
    fetcher._fair.look()
    assert fetcher.in_hand() == 0
    # Back at the fetch end, unrun; the running job stays in the list.
    assert on_cluster.llen(CLUSTER.queue("q0")) == 40 - 4
    assert on_cluster.lrange(unit.private, 0, -1) == [unit.job]


def test_jobs_fetched_ahead_from_a_queue_that_had_a_fault_are_handed_back_not_run(on_cluster):
    fetcher = _unwatched(ClusterFetch(context.config()))
    queued = _push("q1", 40)
    seen = _drain(fetcher, 4)
    ahead = list(fetcher._slot().ahead)
    assert len(ahead) >= 2
    # A primary killed before its replica had the fetch's write: the replica promoted has the
    # jobs queued again, not in the private list. Any command on the queue then fails.
    for unit in ahead:
        assert on_cluster.lrem(unit.private, 1, unit.job) == 1
        on_cluster.rpush(CLUSTER.queue("q1"), unit.job)
    fetcher._failed("q1", ahead[0].private, redis_lib.ConnectionError("primary killed"))
    fetcher._resting.clear()
    rest = _drain(fetcher, len(queued) - len(seen))
    fetcher.flush_acks()
    # Each job ran once: those fetched ahead were dropped by the hand-back (no longer in the
    # private list) and fetched again from their queue.
    assert sorted(seen + rest) == sorted(queued)


def test_a_worker_killed_with_jobs_fetched_ahead_loses_none_and_runs_again_only_those_it_had_started(
        on_cluster, redis_cluster, worker_factory):
    """kill -9 mid-drain, three times: each time the jobs in the dead worker's private lists
    are read. Those it had not started (fetched ahead) start once in all; only jobs that had
    started before a kill start again (the one running, and those that finished with their
    ACK still parked, as on one server), and no job is lost."""
    markers = [f"m{n}" for n in range(600)]
    ClusterSlowJob.set(queue="c0").perform_bulk([[marker, 0.001] for marker in markers])
    env = worker_env(redis_cluster, QUEUES=["c0"], CONCURRENCY=2)
    caught_ahead = 0
    may_restart: set[str] = set()
    not_started_at_a_kill: set[str] = set()
    for round_ in range(3):
        worker = worker_factory("-c", "2", env=env)
        goal = 100 * (round_ + 1)
        wait_for(lambda goal=goal: len(ran(on_cluster)) >= goal, WAIT, 0.01, f"{goal} jobs run")
        worker.kill()
        started = {raw.decode() for raw in on_cluster.lrange("{test}:started", 0, -1)}
        held = [payload.loads(raw)["args"][0]
                for key in on_cluster.scan_iter(match="{q:c0}:private|*", target_nodes=on_cluster.PRIMARIES)
                for raw in on_cluster.lrange(key, 0, -1)]
        ahead = {marker for marker in held if marker not in started}
        caught_ahead += len(ahead)
        not_started_at_a_kill |= ahead
        may_restart |= {marker for marker in held if marker in started}
    assert caught_ahead > 0  # the kills caught jobs fetched ahead in the private lists
    last = worker_factory("-c", "2", env=env)  # recovers the last one's lists at boot
    wait_for(lambda: set(markers) <= set(ran(on_cluster)), WAIT, 0.2, "every job to run")
    assert last.stop(WAIT) == 0
    starts: dict[str, int] = {}
    for raw in on_cluster.lrange("{test}:started", 0, -1):
        starts[raw.decode()] = starts.get(raw.decode(), 0) + 1
    assert set(starts) == set(markers)  # none lost
    restarted = {marker for marker, count in starts.items() if count > 1}
    assert restarted <= may_restart, restarted - may_restart
    assert all(starts[marker] == 1 for marker in not_started_at_a_kill)
    assert not list(on_cluster.scan_iter(match="{q:*}:private|*", target_nodes=on_cluster.PRIMARIES))


def test_a_hard_shutdown_sends_parked_acks_then_gives_back_jobs_fetched_ahead_and_in_flight(on_cluster):
    fetcher = _unwatched(ClusterFetch(context.config()))
    queued = _push("q0", 40)
    done = _drain(fetcher, 4)  # the fourth fetch brought several; the fourth job's ACK is parked
    running = fetcher.retrieve_work()  # taken from the slot, "running" now
    held = fetcher.in_hand()
    assert held >= 1 and fetcher._slot().parked
    fetcher.bulk_requeue([running])
    assert fetcher.in_hand() == 0
    assert not list(on_cluster.scan_iter(match="{q:*}:private|*", target_nodes=on_cluster.PRIMARIES))
    back = [payload.loads(raw)["jid"] for raw in on_cluster.lrange(CLUSTER.queue("q0"), 0, -1)]
    # Every job not finished is queued once (the finished ones not again), the running one and
    # those fetched ahead at the fetch end, so they are fetched first again.
    assert sorted(back) == sorted(set(queued) - set(done))
    assert back[-1] == payload.loads(running.job)["jid"]
