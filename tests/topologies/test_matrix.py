"""The topology matrix (issue 25 item 6): one end-to-end run of every feature on each
topology we support, on real redis-servers the test starts.

For each topology (one Redis, Sentinel, two shards with the worker on the second, TLS,
a Unix socket) a test process pushes a batch with callbacks, a unique job and its
duplicate, a job over its rate limit, an encrypted job and a long job; a real worker
(a swarm of one child) runs them with leader election and a periodic loop on an
accelerated clock; its child is killed with SIGKILL while the long job runs, and the
respawned child must recover that job through reliable fetch. Every key must land on
the topology's data server and none on the suite's own database (nor, for shards, on
the default shard).

The servers are shared by the module and each scenario is short, so the whole matrix
costs CI about a minute.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest
import redis as redis_lib

from tests.redis_servers import every_topology
from tests.support import WorkerProcess, wait_for, wurk_settings
from wurk_django import via
from wurk_django.redis import connection

SPEED = 12  # a cron minute passes in 5 real seconds
FEATURES = {
    "UNIQUE_JOBS": True,
    "ENCRYPTION": {"ACTIVE_VERSION": 1, "KEYS": {1: "a2tra2tra2tra2tra2tra2tra2tra2tra2tra2tra2s="}},
    "LEADER": {"TTL": 1, "RENEW_INTERVAL": 0.3, "FOLLOWER_INTERVAL": 0.3, "INITIAL_WAIT": 0, "CACHE_TTL": 0.2},
    "PERIODIC": [{"cron": "* * * * *", "job": "tests.jobsapp.jobs.ContextCronJob", "args": ["tick"]}],
    "SUPER_FETCH_REAPER_INTERVAL": 1,
    "FETCH_POLL_INTERVAL": 0.5,
}
SECRET = "4111 1111 1111 1111"


@dataclass
class Topology:
    name: str
    settings: dict  # WURK keys for the pushing process and the worker alike
    data: redis_lib.Redis  # where every key must land
    elsewhere: list[redis_lib.Redis] = field(default_factory=list)  # must stay empty
    worker_args: tuple[str, ...] = ()
    shard: str | None = None

    def pushing(self):
        return via(self.shard) if self.shard else contextlib.nullcontext()


@pytest.fixture(scope="module")
def servers() -> Iterator[dict]:
    with every_topology() as started:
        yield started


def _topology(name: str, servers: dict) -> Topology:
    if name == "single":
        return Topology(name, {"REDIS": {"URL": servers["tcp_a"].url(6)}}, servers["tcp_a"].client(6))
    if name == "shards":
        a, b = servers["tcp_a"], servers["tcp_b"]
        return Topology(name, {"REDIS": {"URL": a.url(4)}, "SHARDS": {"b": b.url(5)}}, b.client(5),
                        elsewhere=[a.client(4)], worker_args=("--shard", "b"), shard="b")
    if name == "tls":
        tls = servers["tls"]
        return Topology(name, {"REDIS": {"URL": tls.url(2), "OPTIONS": {"ssl_ca_certs": tls.certs["ca.crt"]}}},
                        tls.client(2))
    if name == "unix":
        return Topology(name, {"REDIS": {"URL": servers["unix"].url(3)}}, servers["unix"].client(3))
    group = servers["sentinel"]
    settings = {"REDIS": {"SENTINELS": [list(a) for a in group.addresses], "SERVICE": group.service,
                          "OPTIONS": {"db": 7}}}
    return Topology(name, settings, redis_lib.Redis(port=group.master_port(), db=7))


def _keys(client: redis_lib.Redis) -> set[str]:
    return {k.decode() for k in client.scan_iter(count=1000)}


def _texts(client: redis_lib.Redis, key: str) -> list[str]:
    return [v.decode() for v in client.lrange(key, 0, -1)]


@pytest.mark.parametrize("name", ["single", "sentinel", "shards", "tls", "unix"])
def test_every_feature_end_to_end_with_a_kill_9(name, servers, redis_db):
    from tests.jobsapp.jobs import (
        ContextSlowJob,
        SecretRecordJob,
        ShardCallbacks,
        ShardLimitedJob,
        ShardRecordJob,
        ShardUniqueJob,
    )
    from wurk_django.batch import Batch

    topo = _topology(name, servers)
    for client in [topo.data, *topo.elsewhere]:
        client.flushdb()
    settings = {**FEATURES, **topo.settings}
    env = {"WURK_TEST_EXTRA": json.dumps(settings), "WURK_TEST_CLOCK": f"{time.time():.3f},{SPEED}"}
    workers: list[WorkerProcess] = []
    try:
        with wurk_settings(**settings), topo.pushing():
            batch = Batch()
            batch.on("success", ShardCallbacks).on("complete", ShardCallbacks)
            with batch.jobs():
                ShardRecordJob.perform_async("in-batch-1")
                ShardRecordJob.perform_async("in-batch-2")
            assert ShardUniqueJob.perform_async("once") is not None
            assert ShardUniqueJob.perform_async("once") is None  # the lock holds on this topology
            limited_jid = ShardLimitedJob.perform_async(f"matrix-{name}")
            SecretRecordJob.perform_async("s", {"card": SECRET})
        queued = b"".join(topo.data.lrange("queue:default", 0, -1))
        assert SECRET.encode() not in queued and b"4111" not in queued  # encrypted on the wire

        # A swarm of one child: the supervisor respawns a killed child at once, and the new
        # child (same nonce) takes its dead sibling's jobs back without the 20 s wait a
        # restarted standalone worker owes a stale heartbeat (tests/server/test_faults.py
        # covers that case on one Redis).
        swarm = WorkerProcess("--processes", "1", "-c", "5", *topo.worker_args, env=env)
        workers.append(swarm)
        data = topo.data
        wait_for(lambda: data.llen("test:callbacks") == 2, timeout=60, message=f"{name}: the batch callbacks")
        wait_for(lambda: data.zcard("schedule") == 1, timeout=30, message=f"{name}: the limited job rescheduled")
        with wurk_settings(**settings), topo.pushing():
            ContextSlowJob.perform_async(4, "victim")
        wait_for(lambda: "victim" in _texts(data, "test:started"), timeout=30, message=f"{name}: the long job to start")
        (holder,) = [k for k in _keys(data) if k.startswith("queue:default|")
                     and any(b"victim" in raw for raw in data.lrange(k, 0, -1))]
        child = int(holder.split("|")[2])
        assert child != swarm.pid
        os.kill(child, signal.SIGKILL)  # mid-run of the long job
        assert "victim" not in _texts(data, "test:finished")
        wait_for(lambda: "victim" in _texts(data, "test:finished"), timeout=90,
                 message=f"{name}: the killed child's job recovered and finished")
        wait_for(lambda: data.llen("test:cron") >= 1, timeout=60, message=f"{name}: a periodic fire")
        assert swarm.stop() == 0, swarm.output()
        assert "died (signal SIGKILL)" in swarm.output()

        ran = _texts(data, "test:ran")
        assert sorted(ran) == sorted(["in-batch-1", "in-batch-2", "unique:once", f"secret:s:{SECRET}"])
        assert sorted(_texts(data, "test:callbacks")) == sorted([f"success:{batch.bid}:2", f"complete:{batch.bid}"])
        assert data.hget(f"b-{batch.bid}", "pending") == b"0"
        assert not any(k.startswith("unique:") for k in _keys(data))  # released after the run
        (rescheduled,) = data.zrange("schedule", 0, -1)
        assert json.loads(rescheduled)["jid"] == limited_jid
        assert any(f"matrix-{name}" in k for k in _keys(data))  # the limiter's own keys
        assert any(k.startswith("loop-history:") for k in _keys(data))
        assert data.smembers("periodic")  # the loops were registered here, by a leader elected here
        assert not [k for k in _keys(data) if k.startswith("queue:default|") and data.llen(k)]  # no orphan left
        for other in [redis_db, *topo.elsewhere]:
            assert _keys(other) == set(), f"{name}: keys on the wrong server"
    finally:
        for worker in workers:
            if worker.alive():
                worker.stop()
        for client in [topo.data, *topo.elsewhere]:
            client.flushdb()
            client.close()
        connection.reset()
