"""``manage.py wurk`` on a real Redis Cluster (3 primaries + 3 replicas) with the process
features of issue 46 item 3, end to end with real worker processes: ``--burst``, a swarm
(``--processes``: forked cluster workers, a killed child's jobs back at once by the fork
sibling rule, memory recycling), capsules, and queue limits (the cap's hash in its queue's
slot, a dead process's slots freed)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import orjson

from tests.jobsapp.cluster_jobs import ClusterRecordJob
from tests.jobsapp.cluster_process_jobs import ClusterPeakJob, ClusterSpinJob
from tests.support import wait_for
from tests.topologies.cluster_client import ran, worker_env
from wurk_django.redis.cluster_layout import CLUSTER

QUEUES = ["c0", "c1", "c2", "c3"]
WAIT = 60.0  # generous: the machine is shared; nothing here asserts a duration


def _env(redis_cluster, **extra) -> dict[str, str]:
    return worker_env(redis_cluster, **{"QUEUES": QUEUES, "SUPER_FETCH_REAPER_INTERVAL": 1, **extra})


def _apart(client) -> tuple[str, str]:
    """Two of QUEUES whose slots are on different primaries."""
    owner = {name: client.get_node_from_key(CLUSTER.queue(name)).port for name in QUEUES}
    return QUEUES[0], next(name for name in QUEUES[1:] if owner[name] != owner[QUEUES[0]])


def _private_lists(client) -> dict[str, int]:
    return {key.decode(): client.llen(key)
            for key in client.scan_iter(match="{q:*}:private|*", target_nodes=client.PRIMARIES)}


def _identities(client) -> dict[int, str]:
    """pid -> identity of every process in ``{wurk}:processes``."""
    return {int(m.decode().split(":")[-2]): m.decode() for m in client.smembers(CLUSTER.processes)}


def _pid_of_private(key: str) -> int:
    return int(key.split("|")[2])


def _gone(pid: int) -> bool:
    """Exited: no such pid, or a zombie nobody reaped yet."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _peaks(client, queue: str) -> list[int]:
    return [int(v) for v in client.lrange(f"{{test}}:peaks:{queue}", 0, -1)]


def test_burst_drains_every_queue_over_the_primaries_then_exits_0(on_cluster, redis_cluster, worker_factory):
    first, second = _apart(on_cluster)
    expected = {f"{q}-{n}" for q in (first, second) for n in range(5)}
    for value in sorted(expected):
        ClusterRecordJob.set(queue=value.split("-")[0]).perform_async(value)
    worker = worker_factory("--burst", "-c", "3", env=_env(redis_cluster))
    assert worker.wait(WAIT) == 0
    assert sorted(ran(on_cluster)) == sorted(expected)  # each ran once
    assert all(on_cluster.llen(CLUSTER.queue(q)) == 0 for q in QUEUES)
    assert on_cluster.smembers(CLUSTER.processes) == set()
    out = worker.output()
    assert "queues are empty: stopping (--burst)" in out and "Traceback" not in out, out[-3000:]
    assert {k: n for k, n in _private_lists(on_cluster).items() if n} == {}


def test_a_swarm_of_cluster_workers_runs_side_by_side_recovers_a_killed_child_and_drains(
        on_cluster, redis_cluster, worker_factory):
    markers = [f"s{n}" for n in range(6)]
    for marker in markers:
        ClusterPeakJob.set(queue="c0").perform_async("c0", marker, 3)
    run = worker_factory("--processes", "2", "-c", "3", env=_env(redis_cluster))
    first = wait_for(lambda: (found := _identities(on_cluster)) and len(found) == 2 and found, WAIT, 0.2,
                     "two children listed")
    wait_for(lambda: on_cluster.llen("{test}:started") == 6, WAIT, 0.1, "six jobs started")
    # Both children hold jobs: they run side by side, each a cluster worker of its own.
    holding = {k: n for k, n in _private_lists(on_cluster).items() if n}
    assert {_pid_of_private(k) for k in holding} == set(first)
    assert {int(p) for p in on_cluster.lrange("{test}:pids", 0, -1)} == set(first)

    victim = _pid_of_private(next(iter(holding)))
    victim_lists = [k for k in holding if _pid_of_private(k) == victim]
    os.kill(victim, signal.SIGKILL)
    # The supervisor forks a replacement and forgets the killed child's entry; its jobs come
    # back from its private lists (a fork sibling whose pid is gone) and run to their end.
    fresh = wait_for(lambda: (found := set(_identities(on_cluster)) - set(first)) and found, WAIT, 0.2,
                     "a replacement child listed")
    wait_for(lambda: victim not in _identities(on_cluster), WAIT, 0.2, "the killed child's entry removed")
    wait_for(lambda: set(markers) <= set(ran(on_cluster)), WAIT, 0.2, "every job finished, the killed child's too")
    assert all(on_cluster.llen(key) == 0 for key in victim_lists)
    assert on_cluster.exists(CLUSTER.process(first[victim])) == 0
    assert "died (signal SIGKILL)" in run.output()

    run.signal(signal.SIGTERM)
    assert run.wait(WAIT) == 0
    assert on_cluster.smembers(CLUSTER.processes) == set()
    assert {k: n for k, n in _private_lists(on_cluster).items() if n} == {}
    assert on_cluster.llen(CLUSTER.queue("c0")) == 0
    survivors = (set(first) | fresh) - {victim}
    wait_for(lambda: all(_gone(pid) for pid in survivors), 15, 0.1, "every child gone")
    assert "Traceback" not in run.output(), run.output()[-3000:]


def test_a_swarm_child_over_the_memory_limit_is_recycled_on_a_cluster(on_cluster, redis_cluster, worker_factory):
    run = worker_factory("--processes", "1", "-c", "2", env=_env(redis_cluster, MEMORY_LIMIT_MB=1))
    old = next(iter(wait_for(lambda: _identities(on_cluster), WAIT, 0.2, "the child listed")))
    new = wait_for(lambda: (found := set(_identities(on_cluster))) and old not in found and found, WAIT, 0.1,
                   "the child recycled")
    assert len(new) == 1
    wait_for(lambda: f"({old}) stopped for memory recycle (exit status 0)" in run.output(), WAIT, 0.2,
             "the recycle to finish")
    assert "over the memory limit of 1 MB" in run.output()
    ClusterRecordJob.set(queue="c1").perform_async("after-recycle")
    wait_for(lambda: ran(on_cluster) == ["after-recycle"], WAIT, 0.2, "a job after the recycle")
    run.signal(signal.SIGTERM)
    assert run.wait(WAIT) == 0


def test_capsules_on_a_cluster_each_run_their_queues_with_their_threads(on_cluster, redis_cluster, worker_factory):
    for n in range(4):
        ClusterPeakJob.set(queue="c1").perform_async("c1", f"single-{n}", 0.5)
        ClusterPeakJob.set(queue="c0").perform_async("c0", f"wide-{n}", 1.5)
    env = _env(redis_cluster, QUEUES=["c0"], CAPSULES={"single": {"queues": ["c1"], "concurrency": 1}})
    worker = worker_factory("-c", "4", env=env)
    wait_for(lambda: len(ran(on_cluster)) == 8, WAIT, 0.2, "every job to run")
    assert max(_peaks(on_cluster, "c1")) == 1  # the capsule's one thread
    assert max(_peaks(on_cluster, "c0")) >= 2  # the default capsule's threads, side by side
    identity = next(iter(_identities(on_cluster).values()))
    info = orjson.loads(on_cluster.hget(CLUSTER.process(identity), "info"))
    assert info["concurrency"] == 5 and info["queues"] == ["c0", "c1"]
    assert {name: c["concurrency"] for name, c in info["capsules"].items()} == {"default": 4, "single": 1}
    assert worker.stop(WAIT) == 0
    assert "2 capsules" in worker.output()


def test_queue_limits_cap_a_queue_across_cluster_workers_and_a_dead_ones_slots_are_freed(
        on_cluster, redis_cluster, worker_factory):
    limit_key = CLUSTER.queue_limit("c2")
    # The cap's hash is in its queue's slot: the fetch takes a job and its slot in one script.
    assert on_cluster.keyslot(limit_key) == on_cluster.keyslot(CLUSTER.queue("c2"))
    for n in range(6):
        ClusterPeakJob.set(queue="c2").perform_async("c2", f"capped-{n}", 1)
    for n in range(4):
        ClusterPeakJob.set(queue="c3").perform_async("c3", f"free-{n}", 1)
    env = _env(redis_cluster, QUEUE_LIMITS={"c2": 2})
    first = worker_factory("-c", "4", env=env)
    second = worker_factory("-c", "4", env=env)
    wait_for(lambda: len(ran(on_cluster)) == 10, WAIT, 0.2, "every job to run")
    assert max(_peaks(on_cluster, "c2")) <= 2  # never more than the cap, over both workers
    wait_for(lambda: on_cluster.hlen(limit_key) == 0, WAIT, 0.2, "every slot freed after the runs")
    assert second.stop(WAIT) == 0

    # A worker killed while holding both slots: the slots stay taken until a live worker's
    # keeper finds their holder dead, then the queue runs again.
    for n in range(2):
        ClusterPeakJob.set(queue="c2").perform_async("c2", f"held-{n}", 5)
    wait_for(lambda: on_cluster.hlen(limit_key) == 2, WAIT, 0.1, "both slots taken")
    holder = {_pid_of_private(f.decode()) for f in on_cluster.hkeys(limit_key)}
    assert holder == {first.pid}
    first.kill()
    # The killed jobs never counted themselves down: count again from here.
    on_cluster.delete("{test}:running:c2", "{test}:peaks:c2")
    ClusterPeakJob.set(queue="c2").perform_async("c2", "after-kill", 0)
    third = worker_factory("-c", "2", env=env)
    wait_for(lambda: "after-kill" in ran(on_cluster), WAIT, 0.2, "the capped queue to run after the kill")
    # The killed worker's held jobs came back (reaper) and its slots went (keeper).
    wait_for(lambda: not {_pid_of_private(f.decode()) for f in on_cluster.hkeys(limit_key)} & {first.pid},
             WAIT, 0.2, "the dead worker's slots freed")
    wait_for(lambda: {"held-0", "held-1"} <= set(ran(on_cluster)), WAIT, 0.2, "the killed worker's jobs run again")
    assert max(_peaks(on_cluster, "c2")) <= 2
    assert third.stop(WAIT) == 0


def test_revoke_terminate_stops_a_job_running_on_a_cluster_worker(on_cluster, redis_cluster, worker_factory):
    from wurk_django import payload
    from wurk_django.api.revoke import MARKED, RUNNING, revoke

    worker = worker_factory("-c", "2", env=_env(redis_cluster, REVOKE_GRACE=1))
    jid = ClusterSpinJob.set(queue="c0").perform_async("spin", 120)
    wait_for(lambda: on_cluster.lrange("{test}:started", 0, -1) == [b"spin"], WAIT, 0.1, "the job running")
    # Told through the process's signals list, popped at its next beat (every 10 s).
    assert revoke(jid, by="erin", terminate=True) in (RUNNING, MARKED)
    wait_for(lambda: on_cluster.zcard(CLUSTER.dead("c0")) == 1, WAIT, 0.2, "the running job revoked")
    dead = payload.loads(on_cluster.zrange(CLUSTER.dead("c0"), 0, -1)[0])
    assert dead["jid"] == jid and dead["revoked_by"] == "erin"
    assert "spin:stopped" in ran(on_cluster) and "spin" not in ran(on_cluster)
    assert on_cluster.zcard(CLUSTER.retry("c0")) == 0  # revoked, not retried
    ClusterRecordJob.set(queue="c0").perform_async("after")
    wait_for(lambda: "after" in ran(on_cluster), WAIT, 0.2, "a job after the revoke")
    assert worker.stop(WAIT) == 0


def test_a_cohosted_swarm_on_a_cluster_forks_cluster_workers_and_drains_at_its_hosts_exit(
        on_cluster, redis_cluster):
    import subprocess
    import sys

    from tests.support import ROOT

    ClusterRecordJob.set(queue="c1").perform_async("cohosted")
    script = (
        "import django, time\n"
        "django.setup()\n"
        "from wurk_django.server.swarm import start_cohosted\n"
        "from wurk_django.redis.cluster_layout import CLUSTER\n"
        "from wurk_django import redis_client\n"
        "swarm = start_cohosted()\n"
        "assert swarm is not None and swarm.cluster\n"
        "client = redis_client()\n"
        "deadline = time.monotonic() + 40\n"
        "while (client.scard(CLUSTER.processes) < 2 or client.llen('{test}:ran') < 1) and time.monotonic() < deadline:\n"
        "    time.sleep(0.05)\n"
        "print(' '.join(str(p) for p in swarm.children), flush=True)\n"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "WURK_COUNT": "2", "PYTHONUNBUFFERED": "1",
           **_env(redis_cluster)}
    proc = subprocess.run([sys.executable, "-c", script], cwd=str(ROOT), env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pids = [int(p) for p in proc.stdout.split()]
    assert len(pids) == 2
    wait_for(lambda: all(_gone(pid) for pid in pids), 30, 0.1, "the co-hosted children gone")
    assert ran(on_cluster) == ["cohosted"]
    assert on_cluster.smembers(CLUSTER.processes) == set()  # drained by the host's exit hook, deregistered
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
