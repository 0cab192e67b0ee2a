"""Workflows on every topology we support (issue 27 item 1 on issue 25 item 6's matrix).

A workflow is steps in batches of their own, moved on by each step batch's ``success``
callback (``advance.lua``) in whichever worker runs it: so a workflow holds on a
topology only if the step jobs, their batches, the callbacks and the workflow's own
keys all follow the worker's Redis. For each topology (one Redis, two shards with the
worker on the second, TLS, a Unix socket, Sentinel with a failover while the workflow
runs) this test pushes a chain feeding a chord from the test process, lets a real
worker process run it, and checks, from Redis and from a record the steps write
outside Redis:

* the workflow succeeded with the right results, every step was given its
  dependencies' results, and none started before its dependencies finished;
* every step was pushed once (one ``enqueued_at`` per step: the workflow starts a
  step once, a replayed callback pushes nothing) and ran once;
* every workflow key, step batch and callback is on the topology's data server, and
  nothing at all on the suite's database nor (shards) on the default shard.

The servers are shared by the module.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import redis as redis_lib

from tests.redis_servers import SentinelGroup, every_topology
from tests.support import WorkerProcess, wait_for, wurk_settings
from wurk_django import via
from wurk_django.redis import connection

#: What docs/redis.md recommends on every data server of a Sentinel group (as
#: tests/topologies/test_sentinel.py runs it): with them, a failover heard by our
#: processes loses no job and runs none twice.
RECOMMENDED = ("--min-replicas-to-write", "1", "--min-replicas-max-lag", "10", "--repl-diskless-sync-delay", "0")
WORKER_SETTINGS = {"FETCH_POLL_INTERVAL": 0.5}
WORKFLOW_KEEP = 7 * 24 * 3600


@dataclass
class Topology:
    name: str
    settings: dict  # WURK keys for the pushing process and the worker alike
    data: redis_lib.Redis  # where every key must land
    elsewhere: list[redis_lib.Redis] = field(default_factory=list)  # must stay empty
    worker_args: tuple[str, ...] = ()
    shard: str | None = None

    @contextlib.contextmanager
    def pushing(self) -> Iterator[None]:
        """The test process's settings for this topology (and its shard)."""
        with wurk_settings(**self.settings), (via(self.shard) if self.shard else contextlib.nullcontext()):
            yield


@pytest.fixture(scope="module")
def servers() -> Iterator[dict]:
    with every_topology(replicas=2, server_args=RECOMMENDED) as started:
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


def _fans(count: int) -> list[str]:
    return [f"fan-{i}" for i in range(count)]


def _workflow(fans: int, seconds: float, gate: Path | None = None):
    """``one`` -> ``two`` -> ``fans`` steps side by side -> ``total``: a chain feeding a
    chord. Each step adds its own number to what it is given (a list summed first) and
    takes ``seconds``; the last of the chord's header waits for the file ``gate``."""
    from tests.jobsapp.workflow_jobs import TopologyStep
    from wurk_django.workflow import chain, chord

    labels = _fans(fans)
    header = [TopologyStep.s(label, 100 * (i + 1), seconds, str(gate) if gate and label == labels[-1] else None)
              for i, label in enumerate(labels)]
    return chain(TopologyStep.s("one", 1, seconds, None), TopologyStep.s("two", 10, seconds, None),
                 chord(header, TopologyStep.s("total", 1000, seconds, None)))


def _expected(fans: int) -> tuple[dict, dict, dict]:
    """Each step's result, what it is given, and the steps it waits for."""
    results = {"one": 1, "two": 11} | {label: 11 + 100 * (i + 1) for i, label in enumerate(_fans(fans))}
    given = {"one": None, "two": 1} | dict.fromkeys(_fans(fans), 11) | {"total": [results[f] for f in _fans(fans)]}
    results["total"] = sum(results[f] for f in _fans(fans)) + 1000
    after = {"one": [], "two": ["one"]} | dict.fromkeys(_fans(fans), ["two"]) | {"total": _fans(fans)}
    return results, given, after


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _read(topo: Topology, read):
    """``read()`` with the topology's settings; None while Redis cannot answer (a failover)."""
    try:
        with topo.pushing():
            return read()
    except redis_lib.RedisError:
        return None


def _finished(topo: Topology, workflow) -> str | None:
    state = _read(topo, lambda: workflow.state)
    return state if state in ("succeeded", "failed", "cancelled") else None


def _check(topo: Topology, workflow, record: Path, fans: int, suite: redis_lib.Redis) -> None:
    results, given, after = _expected(fans)
    data = topo.data
    wid = workflow.id
    # The workflow, as the API reads it on this topology.
    steps = _read(topo, workflow.steps)
    assert steps is not None, f"{topo.name}: the workflow could not be read"
    label_of = {step.name: step.args[0] for step in steps}
    by_label = {step.args[0]: step for step in steps}
    assert sorted(by_label) == sorted(results)
    assert {label: step.state for label, step in by_label.items()} == dict.fromkeys(results, "succeeded")
    assert {label: step.result for label, step in by_label.items()} == results
    assert {label: step.error for label, step in by_label.items()} == dict.fromkeys(results)
    assert {label: [label_of[n] for n in step.after] for label, step in by_label.items()} == after
    # The workflow's hash on the data server: counted once per step, finished, kept WORKFLOW_KEEP.
    fields = {k.decode(): v.decode() for k, v in data.hgetall(f"wf-{wid}").items()}
    assert fields["state"] == "succeeded" and fields["finished_at"]
    assert (fields["total"], fields["succeeded"], fields["failed"]) == (str(len(results)), str(len(results)), "0")
    assert 0 < data.ttl(f"wf-{wid}") <= WORKFLOW_KEEP

    # What the steps recorded outside Redis.
    lines = _records(record)
    starts = [line for line in lines if line["event"] == "start"]
    dones = [line for line in lines if line["event"] == "done"]
    assert Counter(line["label"] for line in starts) == dict.fromkeys(results, 1), f"{topo.name}: runs {lines}"
    assert Counter(line["label"] for line in dones) == dict.fromkeys(results, 1)
    assert {line["label"]: line["given"] for line in starts} == given
    # One push per step: every run of a step carries the payload the workflow pushed once.
    assert {line["label"]: line["jid"] for line in starts} == {label: by_label[label].jid for label in results}
    pushes = {label: {line["enqueued_at"] for line in starts if line["label"] == label} for label in results}
    assert {label: len(times) for label, times in pushes.items()} == dict.fromkeys(results, 1)
    # Never early: a step starts after every step it waits for finished.
    position = {(line["event"], line["label"]): index for index, line in enumerate(lines)}
    early = [(label, dep) for label, deps in after.items() for dep in deps
             if position[("start", label)] < position[("done", dep)]]
    assert early == []

    # A replayed callback changes nothing, and nothing is left waiting to be pushed.
    from wurk_django.workflow.advance import advance

    assert _read(topo, lambda: [advance(wid, step.name) for step in steps]) == [[0, 0]] * len(steps)
    assert _read(topo, workflow.resume) == 0
    assert data.hgetall(f"wf-{wid}") == {k.encode(): v.encode() for k, v in fields.items()}
    assert data.llen("queue:default") == 0

    # Every key on the data server, nothing anywhere else.
    keys = _keys(data)
    assert {f"wf-{wid}", *(f"wf-{wid}-{s}" for s in ("state", "left", "results", "steps"))} <= keys
    assert data.zscore("workflows", wid) is not None
    batches = {f"b-{step.bid}" for step in steps}
    assert batches <= keys, f"{topo.name}: step batches missing from the data server"
    assert all(data.hget(b, "pending") == b"0" for b in batches)  # each step's batch counted its job once
    for other in [suite, *topo.elsewhere]:
        assert _keys(other) == set(), f"{topo.name}: keys on the wrong server"


def _start_worker(topo: Topology, record: Path) -> WorkerProcess:
    env = {"WURK_TEST_EXTRA": json.dumps({**WORKER_SETTINGS, **topo.settings}), "WURK_TEST_RECORD_FILE": str(record)}
    return WorkerProcess("-c", "5", *topo.worker_args, env=env)


def _clean(topo: Topology) -> None:
    for client in [topo.data, *topo.elsewhere]:
        client.flushdb()


@pytest.mark.parametrize("name", ["single", "shards", "tls", "unix"])
def test_a_chain_into_a_chord_runs_on_the_topology(name, servers, redis_db, tmp_path):
    topo = _topology(name, servers)
    record = tmp_path / "steps.jsonl"
    record.touch()
    _clean(topo)
    worker = None
    try:
        with topo.pushing():
            workflow = _workflow(3, 0).run(f"topology {name}")
        worker = _start_worker(topo, record)
        state = wait_for(lambda: _finished(topo, workflow), timeout=90, interval=0.1,
                         message=f"{name}: the workflow to finish")
        assert worker.stop() == 0, worker.output()
        assert state == "succeeded", worker.output()
        _check(topo, workflow, record, 3, redis_db)
    finally:
        if worker is not None and worker.alive():
            worker.stop()
        _clean(topo)
        for client in [topo.data, *topo.elsewhere]:
            client.close()
        connection.reset()


def test_a_workflow_goes_on_through_a_sentinel_failover(servers, redis_db, tmp_path):
    """``SENTINEL FAILOVER`` as soon as the chord's header starts: its steps, their
    batch callbacks (each runs ``advance.lua``; the last one pushes ``total``) and the
    worker's fetches straddle the switch, and the header's last step finishes only
    once the sentinels switched, so the failover always lands mid-workflow. The
    workflow finishes on the new primary, each step pushed once and run once (what
    docs/workflows.md and docs/redis.md promise a process that hears the sentinels)."""
    group: SentinelGroup = servers["sentinel"]
    topo = _topology("sentinel", servers)
    record, gate = tmp_path / "steps.jsonl", tmp_path / "switched"
    record.touch()
    _clean(topo)
    fans = 8
    worker = None
    old_port = group.master_port()
    try:
        with topo.pushing():
            workflow = _workflow(fans, 0.3, gate).run("topology sentinel")
        worker = _start_worker(topo, record)
        wait_for(lambda: any(line["label"].startswith("fan-") for line in _records(record)), timeout=60,
                 message="the chord's header to start")
        group.failover()
        before = _records(record)
        wait_for(lambda: group.master_port() != old_port, timeout=30, message="the sentinels to switch")
        switched = _records(record)
        gate.touch()
        state = wait_for(lambda: _finished(topo, workflow), timeout=120, interval=0.2,
                         message="the workflow to finish after the failover")
        assert worker.stop() == 0, worker.output()
        assert state == "succeeded", worker.output()
        topo.data.close()
        topo.data = redis_lib.Redis(port=group.master_port(), db=7)
        assert topo.data.info("replication")["role"] == "master"
        _check(topo, workflow, record, fans, redis_db)
        done = lambda lines: sum(line["event"] == "done" for line in lines)  # noqa: E731
        print(f"\nWORKFLOW FAILOVER: steps done at the command {done(before)}, at the switch {done(switched)}, "
              f"in all {done(_records(record))} of {fans + 3}")
    finally:
        if worker is not None and worker.alive():
            worker.stop()
        _clean(topo)
        topo.data.close()
        connection.reset()
