"""Issue 27 item 1: a 3-level DAG of 1,000 steps over 3 worker processes, 3 kill -9 during the run.

The steps record every start and finish in Redis (and count their runs), so
"never early" and "exactly once" are checked from what happened, not assumed.
The workers are one ``manage.py wurk --processes 3`` swarm: a child killed with
SIGKILL is respawned and its sibling processes take its jobs back at once
(standalone processes would wait out the 20 s heartbeat rule first).
"""

from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import pytest

from tests.jobsapp.workflow_jobs import FinalStep, GraphStep
from tests.support import children_of, wait_for
from wurk_django.workflow import Flow

pytestmark = pytest.mark.slow

CONCURRENCY = 5
FAST = {"POLL_INTERVAL_AVERAGE": 1, "SUPER_FETCH_REAPER_INTERVAL": 1, "LOG_FLUSH_INTERVAL": 0,
        "CONCURRENCY": CONCURRENCY}



def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def _graph() -> tuple[Flow, dict[str, list[str]]]:
    """10 roots, 490 steps after two roots each, 499 after two of those each, and a final step after all 499."""
    flow = Flow("1,000 steps under kill -9")
    deps: dict[str, list[str]] = {}

    def add(name: str, after: list[str]) -> None:
        after = list(dict.fromkeys(after))
        deps[name] = after
        # Each step is told what its dependencies' results must be, and checks it.
        expected = after[0] if len(after) == 1 else after
        flow.step(name, GraphStep.s(expected if after else None, name), after=after)

    for i in range(10):
        add(f"a{i}", [])
    for i in range(490):
        add(f"b{i}", [f"a{i % 10}", f"a{(i * 7 + 3) % 10}"])
    for i in range(499):
        add(f"c{i}", [f"b{i % 490}", f"b{(i * 13 + 5) % 490}"])
    final = [f"c{i}" for i in range(499)]
    deps["final"] = final
    flow.step("final", FinalStep.s(), after=final)
    assert len(flow.steps) == 1000
    return flow, deps


def test_a_1000_step_dag_survives_three_kill_9(redis_db, worker_factory, capsys):
    flow, deps = _graph()
    swarm = worker_factory("--processes", "3", "-c", str(CONCURRENCY),
                           env={"WURK_TEST_EXTRA": json.dumps(FAST), "WURK_TEST_STEP_SLEEP": "0.005"})
    seen: set[int] = set()
    try:
        wait_for(lambda: len(children_of(swarm.pid)) == 3, timeout=60, message="3 worker processes")
        seen |= children_of(swarm.pid)
        started = time.monotonic()
        workflow = flow.run()
        kills = []
        running_at_kill: list[str | None] = []
        for threshold in (150, 400, 650):
            wait_for(lambda t=threshold: redis_db.llen("test:wf:events") >= 2 * t, timeout=120, interval=0.02,
                     message=f"{threshold} steps")
            children = children_of(swarm.pid)
            seen |= children
            running_at_kill.append(workflow.state)
            victim = random.choice(sorted(children))
            os.kill(victim, signal.SIGKILL)
            kills.append(victim)
            wait_for(lambda v=victim: _gone(v), timeout=15, message=f"killed child {victim} to be gone")
        state = wait_for(lambda: workflow.state if workflow.state in ("succeeded", "failed") else None,
                         timeout=180, interval=0.1, message="the workflow to finish")
        elapsed = time.monotonic() - started
        time.sleep(1.0)  # a duplicate of the final step would show now
        seen |= children_of(swarm.pid)
    finally:
        swarm.stop(timeout=25)
        for pid in seen:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)

    events = [e.decode() for e in redis_db.lrange("test:wf:events", 0, -1)]
    first_start: dict[str, int] = {}
    first_finish: dict[str, int] = {}
    for index, event in enumerate(events):
        kind, step = event.split(":", 1)
        (first_start if kind == "start" else first_finish).setdefault(step, index)
    runs = {name: int(redis_db.get(f"test:wf:runs:{name}") or 0) for name in deps if name != "final"}
    reruns = sum(n - 1 for n in runs.values())
    early = [name for name, after in deps.items() for dep in after
             if dep not in first_finish or first_start.get(name, -1) < first_finish[dep]]
    with capsys.disabled():
        print(f"\n[workflow kill -9] steps=1000 processes=3x{CONCURRENCY} kills={len(kills)} "
              f"seconds={elapsed:.1f} reruns={reruns} final_runs={redis_db.get('test:wf:final')}")
    assert state == "succeeded"
    assert len(kills) == 3 and running_at_kill == ["running"] * 3  # each kill hit a running workflow
    assert all(n >= 1 for n in runs.values())  # every step ran
    # Only jobs in flight at a kill run again: every run but a step's last was in a process
    # killed with -9 (running, or finished with its ACK still parked for the next fetch).
    not_killed = {name: pids[:-1] for name in runs
                  if (pids := [int(p) for p in redis_db.lrange(f"test:wf:pids:{name}", 0, -1)])[:-1]
                  and not set(pids[:-1]) <= set(kills)}
    assert not_killed == {}
    assert early == []  # no step started before all its dependencies finished
    assert redis_db.lrange("test:wf:wrong", 0, -1) == []  # each got its dependencies' results
    assert int(redis_db.get("test:wf:final")) == 1
    assert int(redis_db.get("test:wf:final_count")) == 499
    assert workflow.data()["succeeded"] == 1000
