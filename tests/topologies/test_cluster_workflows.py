"""Workflows on a real Redis Cluster (3 primaries + 3 replicas) with real ``manage.py wurk``
worker processes (issue 46 item 3): chain, fan-out and fan-in over queues on different
primaries, a dead step and its retry, cancel; every key in the cluster layout
(``{wf:<id>}``, the step batches' ``{b:<bid>}``, a claim per pushed step in its queue's
slot), and a step pushed once whatever replays or crashes come between a workflow's
record and its pushes (wurk_django/workflow/cluster.py)."""

from __future__ import annotations

from collections import Counter

import pytest
from redis.crc import key_slot

from tests.jobsapp.cluster_jobs import ClusterAdd, ClusterBrokenStep
from tests.support import wait_for
from tests.topologies.cluster_client import ran, worker_env
from wurk_django import payload
from wurk_django.redis.cluster_layout import CLUSTER
from wurk_django.workflow import Flow, Workflow, WorkflowSet, chain

QUEUES = ["c0", "c1", "c2", "c3", "cb"]
WAIT = 60.0  # generous: the machine is shared; nothing here asserts a duration


def _env(redis_cluster) -> dict[str, str]:
    return worker_env(redis_cluster, QUEUES=QUEUES, CONCURRENCY=3, IMPORT_ON_MISS=["tests.jobsapp"])


def _keys(client, pattern: str) -> list[bytes]:
    return client.keys(pattern, target_nodes=client.PRIMARIES)


def _apart(client, names=QUEUES[:4]) -> list[str]:
    """The queues, the first two on different primaries."""
    owner = {name: client.get_node_from_key(CLUSTER.queue(name)).port for name in names}
    other = next(name for name in names[1:] if owner[name] != owner[names[0]])
    return [names[0], other, *(n for n in names[1:] if n != other)]


def _stopped_cleanly(worker) -> None:
    assert worker.stop(WAIT) == 0
    out = worker.output()
    assert " ERROR: " not in out and "Traceback" not in out, out[-3000:]


def _diamond(queues: list[str]) -> Flow:
    """A chain feeding a fan-out whose results a fan-in sums, its steps on queues of every primary."""
    a, b, c, d = queues
    flow = Flow("diamond", callback_queue="cb")
    flow.step("first", ClusterAdd.s(1, 2).set(queue=a))
    flow.step("second", ClusterAdd.s(10).set(queue=b), after=["first"])
    for n, queue in enumerate((c, d, a)):
        flow.step(f"fan{n}", ClusterAdd.s(n).set(queue=queue), after=["second"])
    flow.step("sum", ClusterAdd.s().set(queue=b), after=["fan0", "fan1", "fan2"])
    return flow


def test_a_chain_into_a_fan_in_runs_once_each_over_every_primary(on_cluster, redis_cluster, worker_factory):
    queues = _apart(on_cluster)
    wf = _diamond(queues).run()
    # Written in the cluster layout: one slot for the workflow, nothing of the one-server layout.
    names = [CLUSTER.workflow(wf.id), *(CLUSTER.workflow(wf.id, s) for s in ("state", "left", "wire", "steps"))]
    assert all(on_cluster.exists(name) for name in names)
    assert len({key_slot(name.encode()) for name in names}) == 1
    assert on_cluster.zscore(CLUSTER.workflows, wf.id) is not None
    assert not _keys(on_cluster, "wf-*") and not _keys(on_cluster, "b-*") and not on_cluster.exists("workflows")
    # Only the first step is queued, with its push claimed in its queue's slot.
    [raw] = on_cluster.lrange(CLUSTER.queue(queues[0]), 0, -1)
    first = payload.loads(raw)
    assert first["wf"] == [wf.id, "first"] and first["args"] == [1, 2]
    assert on_cluster.exists(CLUSTER.workflow_pushed(queues[0], wf.id, "first"))
    assert on_cluster.hget(CLUSTER.batch(first["bid"]), "total") == b"1"
    assert wf.state == "running" and wf.step_states()["first"] == "enqueued"

    worker = worker_factory("-c", "3", env=_env(redis_cluster))
    wait_for(lambda: wf.state == "succeeded", WAIT, 0.2, "the workflow to succeed")
    assert wf.results() == {"first": 3, "second": 13, "fan0": 13, "fan1": 14, "fan2": 15, "sum": 42}
    records = ran(on_cluster)
    assert Counter(records) == Counter(["add:[1, 2]", "add:[3, 10]", "add:[13, 0]", "add:[13, 1]", "add:[13, 2]",
                                        "add:[[13, 14, 15]]"])  # each step ran once
    # Each in its turn: the chain before the fan-out, the fan-in last.
    assert records[:2] == ["add:[1, 2]", "add:[3, 10]"] and records[-1] == "add:[[13, 14, 15]]"
    assert all(s.state == "succeeded" for s in wf.steps())
    assert wf.data()["succeeded"] == 6
    # Every step's push claimed once, in its own queue's slot.
    for step in wf.steps():
        assert on_cluster.exists(CLUSTER.workflow_pushed(step.queue, wf.id, step.name)), step.name
        assert on_cluster.hget(CLUSTER.batch(step.bid), "success") == b"1", step.name
    assert [row["id"] for row in WorkflowSet().summaries()] == [wf.id]
    _stopped_cleanly(worker)
    assert len(ran(on_cluster)) == 6


def test_a_dead_step_fails_the_workflow_until_its_retry_succeeds(on_cluster, redis_cluster, worker_factory):
    queues = _apart(on_cluster)
    flow = Flow(callback_queue="cb")
    flow.step("ok", ClusterAdd.s(1).set(queue=queues[0]))
    flow.step("broken", ClusterBrokenStep.si("broken").set(queue=queues[1]), after=["ok"])
    flow.step("after", ClusterAdd.si(5).set(queue=queues[2]), after=["broken"])
    wf = flow.run()
    worker = worker_factory("-c", "3", env=_env(redis_cluster))
    wait_for(lambda: wf.state == "failed", WAIT, 0.2, "the workflow to fail")
    assert wf.step_states() == {"ok": "succeeded", "broken": "failed", "after": "waiting"}
    assert {s.name: s.error for s in wf.steps()}["broken"] == "RuntimeError: broken is broken"
    on_cluster.set("{test}:fixed", "1")
    assert wf.retry() == ["broken"]
    wait_for(lambda: wf.state == "succeeded", WAIT, 0.2, "the workflow to go on after the retry")
    assert ran(on_cluster) == ["add:[1]", "broken", "add:[5]"]
    _stopped_cleanly(worker)


def test_a_step_in_its_queues_dead_set_is_retried_from_there(on_cluster, redis_cluster, worker_factory):
    steps = chain(ClusterBrokenStep.si("dies").set(queue="c1", retry=0), ClusterAdd.si(7).set(queue="c2"))
    wf = steps.run(callback_queue="cb")
    worker = worker_factory("-c", "2", env=_env(redis_cluster))
    wait_for(lambda: wf.state == "failed" and on_cluster.zcard(CLUSTER.dead("c1")) == 1, WAIT, 0.2,
             "the step in its queue's dead set")
    on_cluster.set("{test}:fixed", "1")
    first = wf.steps()[0].name
    assert wf.retry(first) == [first]
    assert on_cluster.zcard(CLUSTER.dead("c1")) == 0
    wait_for(lambda: wf.state == "succeeded", WAIT, 0.2, "the workflow to succeed")
    assert ran(on_cluster) == ["dies", "add:[7]"]
    _stopped_cleanly(worker)


def test_cancel_starts_nothing_more(on_cluster, redis_cluster, worker_factory):
    from wurk_django import pause

    pause.pause("c0")  # the first step waits on its queue
    wf = chain(ClusterAdd.s(1).set(queue="c0"), ClusterAdd.s(2).set(queue="c1")).run(callback_queue="cb")
    assert wf.cancel() is True and wf.state == "cancelled"
    assert on_cluster.ttl(CLUSTER.workflow(wf.id)) > 0
    assert all(s == "cancelled" for s in wf.step_states().values())
    worker = worker_factory("-c", "2", env=_env(redis_cluster))
    pause.unpause("c0")
    # The queued step's job is taken and skipped (its batch counts it done, so its callback runs).
    first = wf.steps()[0]
    wait_for(lambda: on_cluster.hget(CLUSTER.batch(first.bid), "success") == b"1", WAIT, 0.2,
             "the cancelled step taken and skipped")
    wait_for(lambda: on_cluster.llen(CLUSTER.queue("cb")) == 0, WAIT, 0.2, "its callback taken")
    _stopped_cleanly(worker)  # the callback, if running, finishes first
    assert ran(on_cluster) == [] and on_cluster.llen(CLUSTER.queue("c1")) == 0 and wf.state == "cancelled"


def test_a_replay_between_the_record_and_the_pushes_pushes_each_step_once(on_cluster):
    """The crash of workflow/cluster.py: advance.lua recorded the step and made its dependent
    ready, then its process died before the push. The callback's replay pushes it, once."""
    from wurk_django.workflow import advance, scripts

    wf = chain(ClusterAdd.s(1).set(queue="c0"), ClusterAdd.s(2).set(queue="c1")).run(callback_queue="cb")
    [raw] = on_cluster.lrange(CLUSTER.queue("c0"), 0, -1)
    on_cluster.hset(CLUSTER.workflow(wf.id, "results"), wf.steps()[0].name, "1")
    first, second = [s.name for s in wf.steps()]
    reply = scripts.advance(on_cluster, wf.id, first, "1.0", 60, [(second, "c1")])
    assert reply[:2] == [1, 0] and wf.step_states() == {first: "succeeded", second: "enqueued"}
    assert on_cluster.llen(CLUSTER.queue("c1")) == 0  # ...and the process died here
    for _ in range(2):  # the callback job run again, twice
        assert advance.advance(wf.id, first) == [0, 0]
    [pushed] = on_cluster.lrange(CLUSTER.queue("c1"), 0, -1)
    assert payload.loads(pushed)["args"] == [1, 2] and payload.loads(pushed)["wf"] == [wf.id, second]


def test_a_creator_dead_before_the_first_pushes_leaves_a_workflow_resume_starts(on_cluster, monkeypatch):
    from wurk_django.workflow import cluster

    def died(*args, **kwargs):
        raise KeyboardInterrupt("the creator died")

    with monkeypatch.context() as patched:
        patched.setattr(cluster, "push", died)
        with pytest.raises(KeyboardInterrupt):
            chain(ClusterAdd.s(1).set(queue="c0"), ClusterAdd.s(2).set(queue="c1")).run(callback_queue="cb")
    [wid] = WorkflowSet().ids()
    wf = Workflow(wid)
    assert list(wf.step_states().values()) == ["enqueued", "waiting"] and on_cluster.llen(CLUSTER.queue("c0")) == 0
    assert wf.resume() == 0  # nothing was waiting: the enqueued step's push is made good
    assert wf.resume() == 0
    [raw] = on_cluster.lrange(CLUSTER.queue("c0"), 0, -1)
    assert payload.loads(raw)["wf"] == [wid, wf.steps()[0].name]


def _graph(queues: list[str]) -> tuple[Flow, dict[str, list[str]]]:
    """8 roots, 80 steps after two roots each, 80 after two of those each, a final step after
    those 80; steps over every queue (every primary), callbacks on their own queue."""
    from tests.jobsapp.cluster_jobs import ClusterFinalStep, ClusterGraphStep

    flow = Flow("169 steps under kill -9", callback_queue="cb")
    deps: dict[str, list[str]] = {}

    def add(name: str, after: list[str], n: int) -> None:
        after = list(dict.fromkeys(after))
        deps[name] = after
        expected = after[0] if len(after) == 1 else after  # what its dependencies return: their names
        flow.step(name, ClusterGraphStep.s(expected if after else None, name).set(queue=queues[n % len(queues)]),
                  after=after)

    for i in range(8):
        add(f"a{i}", [], i)
    for i in range(80):
        add(f"b{i}", [f"a{i % 8}", f"a{(i * 3 + 1) % 8}"], i)
    for i in range(80):
        add(f"c{i}", [f"b{i}", f"b{(i * 13 + 5) % 80}"], i)
    deps["final"] = [f"c{i}" for i in range(80)]
    flow.step("final", ClusterFinalStep.s().set(queue=queues[0]), after=deps["final"])
    return flow, deps


def test_a_graph_over_every_primary_survives_kill_9_of_its_workers(on_cluster, redis_cluster, worker_factory):
    """Two worker processes, each killed with -9 once mid-run (a new one started each time):
    every step runs, none before its dependencies finished, each given their results, the
    fan-in once; a step runs again only if it was in flight in a killed process, and no step
    is pushed twice (a killed callback's replay pushes what it had not pushed, once)."""
    queues = _apart(on_cluster)
    flow, deps = _graph(queues)
    env = worker_env(redis_cluster, QUEUES=QUEUES, CONCURRENCY=3, IMPORT_ON_MISS=["tests.jobsapp"],
                     SUPER_FETCH_REAPER_INTERVAL=1)
    workers = [worker_factory("-c", "3", env=env) for _ in range(2)]
    wait_for(lambda: on_cluster.scard(CLUSTER.processes) == 2, WAIT, 0.2, "two workers beating")
    wf = flow.run()
    killed: list[int] = []
    for threshold in (40, 110):
        wait_for(lambda t=threshold: on_cluster.llen("{test}:events") >= 2 * t, 2 * WAIT, 0.02, f"{threshold} steps")
        victim = workers.pop(0)
        victim.kill()
        killed.append(victim.pid)
        assert wf.state == "running"  # the kill hit a running workflow
        workers.append(worker_factory("-c", "3", env=env))
    wait_for(lambda: wf.state in ("succeeded", "failed"), 3 * WAIT, 0.2, "the workflow to finish")
    for worker in workers:
        _stopped_cleanly(worker)

    assert wf.state == "succeeded" and wf.data()["succeeded"] == len(deps)
    events = [e.decode() for e in on_cluster.lrange("{test}:events", 0, -1)]
    first_start: dict[str, int] = {}
    first_finish: dict[str, int] = {}
    for index, event in enumerate(events):
        kind, step = event.split(":", 1)
        (first_start if kind == "start" else first_finish).setdefault(step, index)
    early = [name for name, after in deps.items() for dep in after
             if dep not in first_finish or first_start.get(name, -1) < first_finish[dep]]
    assert early == []
    assert on_cluster.lrange("{test}:wrong", 0, -1) == []
    runs = {name: int(on_cluster.get(f"{{test}}:runs:{name}") or 0) for name in deps if name != "final"}
    assert all(n >= 1 for n in runs.values())
    # Every run but a step's last was in a killed process: only jobs in flight ran again.
    again = {name: pids[:-1] for name in runs
             if (pids := [int(p) for p in on_cluster.lrange(f"{{test}}:pids:{name}", 0, -1)])[:-1]
             and not set(pids[:-1]) <= set(killed)}
    assert again == {}
    assert int(on_cluster.get("{test}:final")) == 1 and int(on_cluster.get("{test}:final_count")) == 80
    # Each step pushed once: one claim each, and no step's job is left anywhere.
    for step in wf.steps():
        assert on_cluster.exists(CLUSTER.workflow_pushed(step.queue, wf.id, step.name)), step.name
    assert sum(on_cluster.llen(CLUSTER.queue(q)) for q in QUEUES) == 0
