"""An idle ``-c 1`` worker watches its one queue on every topology (issue 30 item 3).

A fetcher of one thread does not block on its queue: it arms the push watch on a
pooled connection (``CLIENT TRACKING ... REDIRECT`` to the process's one subscribed
connection) and waits for Redis's notice. Here a real worker (``manage.py wurk -c 1``,
``FETCH_POLL_INTERVAL`` a minute, so its safety look is 15 minutes away) must run a
job pushed with a bare ``LPUSH`` (what Ruby Sidekiq's client sends) on one Redis, two
shards (the worker on the second), TLS, a Unix socket and Sentinel, where it must
arm again on the promoted primary after a failover and run the next bare push there.
No assertion is about how fast anything is: the waits are far below the safety look.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import redis as redis_lib

from tests.redis_servers import every_topology
from tests.support import WorkerProcess, wait_for
from tests.topologies.test_matrix import _topology

WAIT = 60  # generous, and far below the 15-minute safety look


@pytest.fixture(scope="module")
def servers() -> Iterator[dict]:
    with every_topology() as started:
        yield started


def _armed(client: redis_lib.Redis) -> bool:
    """A connection to ``client``'s database has key tracking on (flag ``t``): armed."""
    db = int(client.connection_pool.connection_kwargs.get("db", 0))
    return any("t" in c.get("flags", "") and int(c["db"]) == db for c in client.client_list())


def _bare_push(client: redis_lib.Redis, jid: str) -> None:
    job = {"class": "tests.jobsapp.jobs.ContextRecordJob", "args": ["test:ran"], "queue": "default",
           "jid": jid, "retry": True, "created_at": time.time(), "enqueued_at": time.time()}
    client.sadd("queues", "default")
    client.lpush("queue:default", json.dumps(job))


def _ran(client: redis_lib.Redis) -> list[str]:
    return [json.loads(raw)["jid"] for raw in client.lrange("test:ran", 0, -1)]


@pytest.mark.parametrize("name", ["single", "shards", "tls", "unix", "sentinel"])
def test_an_idle_worker_of_one_thread_runs_a_bare_lpush_on_every_topology(name, servers):
    topo = _topology(name, servers)
    for client in [topo.data, *topo.elsewhere]:
        client.flushdb()
    env = {"WURK_TEST_EXTRA": json.dumps({**topo.settings, "FETCH_POLL_INTERVAL": 60})}
    worker = WorkerProcess("-c", "1", *topo.worker_args, env=env)
    data = topo.data
    try:
        wait_for(lambda: _armed(data), timeout=WAIT, message=f"{name}: the worker to arm its watch")
        _bare_push(data, "first")
        wait_for(lambda: _ran(data) == ["first"], timeout=WAIT, message=f"{name}: the bare LPUSH to run")
        if name == "sentinel":
            group = servers["sentinel"]
            old_port = group.master_port()
            group.failover()
            wait_for(lambda: group.master_port() != old_port, timeout=30, message="the sentinels to switch")
            data = redis_lib.Redis(port=group.master_port(), db=7)
            wait_for(lambda: _armed(data), timeout=WAIT, message="the worker to arm again on the new primary")
            _bare_push(data, "after-failover")
            wait_for(lambda: _ran(data) == ["first", "after-failover"], timeout=WAIT,
                     message="the bare LPUSH after the failover to run")
        for other in topo.elsewhere:
            assert not other.keys("queue:*") and not other.exists("test:ran")
        assert worker.alive(), worker.output()
    finally:
        worker.stop()
        if data is not topo.data:
            data.close()
    assert "Traceback" not in worker.output(), worker.output()
