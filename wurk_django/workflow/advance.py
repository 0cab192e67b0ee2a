"""Moving a workflow on: the batch callback run when a step's batch succeeded.

Each step's job is the one member of a batch of its own. When the job
succeeds, the batch's ``success`` fires once (batches guarantee it: the event
is claimed and its callback job pushed in one script), and that callback job
runs :class:`StepDone`, which runs ``advance.lua``: the step becomes
``succeeded`` and each step that waited only for it is pushed, in one atomic
step. The callback job may run twice (a worker killed while running it): the
script's state checks make the second run change nothing.

On a Redis Cluster the script records and hands the ready steps' jobs back, and
each is pushed with a claim in its queue's slot (:mod:`.cluster`): a replay there
pushes what a crash left unpushed, and nothing twice.
"""

from __future__ import annotations

from typing import Any

from .. import context as job_context
from .. import payload
from ..redis.cluster_layout import layout_of
from ..redis.errors import ride_out
from ..text import to_text
from . import cluster, keys, scripts


def wire_fields(raw: bytes | str) -> dict[str, Any]:
    """A step's wire record: ``mode``, ``queue``, ``deps``, ``dependents``, ``args``, ``head``."""
    text = to_text(raw)
    mode, queue, deps, dependents, args, head = text.split("\n", 5)
    return {"mode": mode, "queue": queue, "deps": [d for d in deps.split(",") if d],
            "dependents": [d for d in dependents.split(",") if d], "args": args, "head": head}


def candidates(redis: Any, wid: str, names: list[str]) -> list[tuple[str, str]]:
    """``(step, queue)`` of ``names`` (queues are fixed when the workflow is written)."""
    if not names:
        return []
    raws = redis.hmget(keys.workflow(wid, "wire", layout_of(redis)), names)
    return [(name, wire_fields(raw)["queue"]) for name, raw in zip(names, raws, strict=True) if raw]


def _run(redis: Any, wid: str, step: str, found: list[tuple[str, str]]) -> list[int]:
    """``advance.lua`` for ``step`` over the candidate steps ``found``; on a cluster, then
    the pushes of the jobs it handed back. ``[steps made ready, finished now]``."""
    config = job_context.config()
    reply = scripts.advance(redis, wid, step, payload.dumps(config.wire_format.now()).decode(),
                            config.workflow_keep, found)
    if layout_of(redis).cluster:
        cluster.push(config, wid, cluster.handed(reply))
    return [int(reply[0]), int(reply[1])]


def advance(wid: str, step: str) -> list[int]:
    """Record ``step`` of ``wid`` as succeeded and push what waited only for it:
    ``[steps pushed, finished now]`` (``[-1, 0]``: the workflow is gone)."""
    redis = job_context.layout_redis()
    raw = redis.hget(keys.workflow(wid, "wire", layout_of(redis)), step)
    if raw is None:
        return [-1, 0]
    return _run(redis, wid, step, candidates(redis, wid, wire_fields(raw)["dependents"]))


def start_ready(wid: str) -> int:
    """Push every step still waiting with nothing left to wait for (safe at any time); how
    many. On a cluster, also every ``enqueued`` step whose push was never claimed (a crash
    between a step's record and its push): pushed now, once."""
    redis = job_context.layout_redis()
    layout = layout_of(redis)
    states = redis.hgetall(keys.workflow(wid, "state", layout))
    left = redis.hgetall(keys.workflow(wid, "left", layout))
    ready = [to_text(name) for name, state in states.items()
             if (state == b"waiting" and int(left.get(name) or 0) <= 0) or (layout.cluster and state == b"enqueued")]
    return _run(redis, wid, "", candidates(redis, wid, ready))[0]


def payload_for(redis: Any, wid: str, step: str, now: Any) -> dict | None:
    """The job of ``step`` as ``advance.lua`` pushes it (results of its dependencies in
    front of its arguments), for pushing it again by hand; None if the step is unknown."""
    layout = layout_of(redis)
    raw = redis.hget(keys.workflow(wid, "wire", layout), step)
    if raw is None:
        return None
    fields = wire_fields(raw)
    stored = redis.hmget(keys.workflow(wid, "results", layout), fields["deps"]) if fields["deps"] else []
    values = [to_text(v) if v is not None else "null" for v in stored]
    given = {"one": values[0] if values else "", "list": "[" + ",".join(values) + "]"}.get(fields["mode"], "")
    args = ",".join(part for part in (given, fields["args"]) if part)
    return payload.loads(f'{fields["head"]}"args":[{args}],"enqueued_at":{now}}}')


class StepDone:
    """The ``success`` callback of every step's batch (``options``: ``workflow``, ``step``)."""

    def on_success(self, status: Any, options: dict) -> None:
        wid, step = str(options["workflow"]), str(options["step"])
        # Safe to repeat (a replay changes nothing): a failover delays the workflow by
        # seconds, not by the callback job's retry backoff.
        ride_out(lambda: advance(wid, step), f"workflow {wid}: moving on after step {step}")
