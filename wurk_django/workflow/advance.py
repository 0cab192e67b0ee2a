"""Moving a workflow on: the batch callback run when a step's batch succeeded.

Each step's job is the one member of a batch of its own. When the job
succeeds, the batch's ``success`` fires once (batches guarantee it: the event
is claimed and its callback job pushed in one script), and that callback job
runs :class:`StepDone`, which runs ``advance.lua``: the step becomes
``succeeded`` and each step that waited only for it is pushed, in one atomic
step. The callback job may run twice (a worker killed while running it): the
script's state checks make the second run change nothing.
"""

from __future__ import annotations

from typing import Any

from .. import context as job_context
from .. import payload
from ..redis.errors import ride_out
from ..text import to_text
from . import keys, scripts


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
    raws = redis.hmget(keys.workflow(wid, "wire"), names)
    return [(name, wire_fields(raw)["queue"]) for name, raw in zip(names, raws, strict=True) if raw]


def advance(wid: str, step: str) -> list[int]:
    """Record ``step`` of ``wid`` as succeeded and push what waited only for it:
    ``[steps pushed, finished now]`` (``[-1, 0]``: the workflow is gone)."""
    config = job_context.config()
    redis = job_context.redis()
    raw = redis.hget(keys.workflow(wid, "wire"), step)
    if raw is None:
        return [-1, 0]
    found = candidates(redis, wid, wire_fields(raw)["dependents"])
    return scripts.advance(redis, wid, step, payload.dumps(config.wire_format.now()).decode(),
                           config.workflow_keep, found)


def start_ready(wid: str) -> int:
    """Push every step still waiting with nothing left to wait for (safe at any time); how many."""
    config = job_context.config()
    redis = job_context.redis()
    states = redis.hgetall(keys.workflow(wid, "state"))
    left = redis.hgetall(keys.workflow(wid, "left"))
    ready = [to_text(name) for name, state in states.items()
             if state == b"waiting" and int(left.get(name) or 0) <= 0]
    return scripts.advance(redis, wid, "", payload.dumps(config.wire_format.now()).decode(),
                           config.workflow_keep, candidates(redis, wid, ready))[0]


def payload_for(redis: Any, wid: str, step: str, now: Any) -> dict | None:
    """The job of ``step`` as ``advance.lua`` pushes it (results of its dependencies in
    front of its arguments), for pushing it again by hand; None if the step is unknown."""
    raw = redis.hget(keys.workflow(wid, "wire"), step)
    if raw is None:
        return None
    fields = wire_fields(raw)
    stored = redis.hmget(keys.workflow(wid, "results"), fields["deps"]) if fields["deps"] else []
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
