"""A workflow as a graph of named steps: :class:`Flow`.

::

    flow = Flow("nightly import")
    flow.step("fetch_a", Fetch.s("a"))
    flow.step("fetch_b", Fetch.s("b"))
    flow.step("merge", Merge.s(), after=["fetch_a", "fetch_b"])
    workflow = flow.run()

A step starts once every step in its ``after`` list succeeded. A mutable
signature receives the results of its dependencies in front of its own
arguments: the one result when it has one dependency, the list of results (in
``after`` order) when it has several. :func:`~wurk_django.workflow.chain`,
:func:`~wurk_django.workflow.group` and :func:`~wurk_django.workflow.chord`
build such a graph.

Each step runs as one job inside a batch of its own, whose ``success`` callback
moves the workflow on (see docs/workflows.md); :meth:`Flow.run` writes the whole
graph, the step batches and the first jobs in one Redis transaction (on a Redis
Cluster, in the steps :mod:`wurk_django.workflow.cluster` orders).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .. import context as job_context
from .. import payload
from ..batch import scripts as batch_scripts
from ..batch.batch import Batch, new_bid
from ..client import cluster_writer
from ..redis.cluster_layout import layout_of
from ..redis.layout_client import one_slot
from . import cluster as workflow_cluster
from . import keys, scripts
from .errors import InvalidWorkflow
from .signature import Signature

if TYPE_CHECKING:
    from ..client.push import Client

#: Most steps one workflow may have (its creation is one Redis transaction on one server).
MAX_STEPS = 5000
#: How long a workflow lives while it runs (its step batches live as long).
EXPIRY = batch_scripts.DEFAULT_EXPIRY
#: The batch callback that moves a workflow on when a step's batch succeeds.
STEP_DONE = "wurk_django.workflow.advance.StepDone"
STEP_NAME = re.compile(r"^[A-Za-z0-9_.:@/-]{1,200}$")
#: How the results of a step's dependencies are given to it.
MODES = ("none", "one", "list")


@dataclass
class Step:
    name: str
    signature: Signature
    after: list[str] = field(default_factory=list)
    results: str | None = None  # None: decided from the signature and after

    @property
    def mode(self) -> str:
        if self.signature.immutable or not self.after:
            return "none"
        if self.results is not None:
            return self.results
        return "one" if len(self.after) == 1 else "list"


class Flow:
    """A graph of named steps; nothing is written until :meth:`run`."""

    def __init__(self, description: str = "", *, callback_queue: str = "default") -> None:
        self.description = description
        #: Queue of the batch callbacks that move the workflow on (serve it in some worker).
        self.callback_queue = callback_queue
        self.steps: dict[str, Step] = {}

    def step(self, name: str, signature: Signature, after: Iterable[str] = (), *, results: str | None = None) -> str:
        """Add step ``name`` running ``signature`` once every step in ``after`` succeeded; returns ``name``.

        ``results`` forces how dependencies' results are given: ``"one"`` (the first
        dependency's result), ``"list"`` (all of them, in ``after`` order) or
        ``"none"``; by default one result for one dependency, a list for several.
        """
        if not isinstance(name, str) or not STEP_NAME.match(name):
            raise InvalidWorkflow(f"a step name is 1-200 characters of letters, digits and _.:@/-, not {name!r}")
        if name in self.steps:
            raise InvalidWorkflow(f"step {name!r} is defined twice")
        if not isinstance(signature, Signature):
            raise InvalidWorkflow(f"step {name!r}: a step runs a Signature (Job.s(...)), not {signature!r}")
        if isinstance(after, str):
            after = [after]
        after = list(after)
        if len(set(after)) != len(after):
            raise InvalidWorkflow(f"step {name!r} lists a dependency twice: {after!r}")
        if results is not None and results not in MODES:
            raise InvalidWorkflow(f"step {name!r}: results must be one of {MODES}, not {results!r}")
        self.steps[name] = Step(name, signature, after, results)
        return name

    def order(self) -> list[str]:
        """The steps, each after its dependencies; :class:`InvalidWorkflow` on a cycle or unknown name."""
        for step in self.steps.values():
            for dep in step.after:
                if dep not in self.steps:
                    raise InvalidWorkflow(f"step {step.name!r} waits for {dep!r}, which is not a step")
        done: list[str] = []
        placed: set[str] = set()
        visiting: list[str] = []
        for start in self.steps:
            if start in placed:
                continue
            stack = [(start, iter(self.steps[start].after))]
            visiting.append(start)
            while stack:
                name, deps = stack[-1]
                for dep in deps:
                    if dep in placed:
                        continue
                    if dep in visiting:
                        cycle = visiting[visiting.index(dep):] + [dep]
                        raise InvalidWorkflow(f"the steps form a cycle: {' -> '.join(reversed(cycle))}")
                    visiting.append(dep)
                    stack.append((dep, iter(self.steps[dep].after)))
                    break
                else:
                    stack.pop()
                    visiting.pop()
                    placed.add(name)
                    done.append(name)
        return done

    def run(self) -> Workflow:  # noqa: F821 (the handle class is imported below, at call time)
        """Write the workflow and push the steps that wait for nothing; returns its handle."""
        from .status import Workflow

        if not self.steps:
            raise InvalidWorkflow("a workflow needs at least one step")
        if len(self.steps) > MAX_STEPS:
            raise InvalidWorkflow(f"a workflow has at most {MAX_STEPS} steps, not {len(self.steps)}")
        order = self.order()
        config = job_context.config()
        from .. import testing

        if testing.mode(config) is not None:
            # The steps are pushed by a Redis script, past the testing modes' client: say so
            # rather than write to Redis from a test that expects nothing to be written.
            raise InvalidWorkflow(f"workflows need Redis and a worker; testing mode {testing.mode(config)!r} "
                                  f"cannot run them (run the workflow's jobs with a worker in the test)")
        # On a Redis Cluster the workflow's keys are {wf:<id>} and its start is several steps
        # in their order (issue 46 item 3, workflow/cluster.py); one MULTI on one server.
        redis = job_context.layout_redis()
        layout = layout_of(redis)
        from ..client.push import Client

        # Every step goes through the push door now (validation, client middleware: a
        # sealed argument is sealed, a unique lock taken; the argument check), so the
        # scripts that push the steps later only move bytes that were planned here.
        client = Client(redis=redis, config=config)
        wid = new_bid()
        now = time.time()
        dependents: dict[str, list[str]] = {name: [] for name in self.steps}
        for step in self.steps.values():
            for dep in step.after:
                dependents[dep].append(step.name)
        batch_commands: list[tuple] = []
        wire: dict[str, str] = {}
        specs: dict[str, bytes] = {}
        roots: list[tuple[str, str]] = []
        jids: dict[str, str] = {}
        for name in order:
            step = self.steps[name]
            signature = step.signature
            batch = Batch()
            batch.description = f"workflow {wid}: step {name}"
            batch.callback_queue = self.callback_queue
            batch.on("success", STEP_DONE, {"workflow": wid, "step": name})
            batch.expires_in(EXPIRY)
            # A signature may name its job's id (Celery's ``task_id``), so a caller knows
            # every step's id before the workflow is written.
            jid = signature.options.get("jid") or payload.new_jid()
            if jid in jids:
                raise InvalidWorkflow(f"step {name!r}: job id {jid!r} is already the id of step {jids[jid]!r}")
            jids[jid] = name
            job = _plan_step(client, step, {"class": signature.target, "args": list(signature.args),
                                            **signature.options, "jid": jid, "bid": batch.bid, "wf": [wid, name],
                                            **({"kwargs": signature.kwargs} if signature.kwargs else {})})
            queue = str(job["queue"])
            head = payload.dumps({k: v for k, v in job.items() if k not in ("args", "enqueued_at")}).decode()
            own_args = payload.dumps(job["args"]).decode()[1:-1]
            wire[name] = "\n".join([step.mode, queue, ",".join(step.after), ",".join(dependents[name]), own_args,
                                    head[:-1] + ","])
            # The planned arguments (a sealed one sealed), never the signature's own.
            specs[name] = payload.dumps({**signature.to_dict(), "args": job["args"], "kwargs": job.get("kwargs", {}),
                                         "after": step.after, "mode": step.mode, "jid": jid, "bid": batch.bid,
                                         "queue": queue})
            # The step's jid is the batch's one member from the start, so the batch waits
            # for that job however late the workflow pushes it.
            batch_commands += batch.creation_commands(now, members=[jid], layout=layout)
            if not step.after:
                roots.append((name, queue))
        if layout.cluster:
            # Step 1 of workflow/cluster.py: the step batches, answered before the workflow exists.
            cluster_writer.send(redis, batch_commands)
            pipe = one_slot(redis, layout.workflow(wid)).pipeline(transaction=True)
        else:
            pipe = redis.pipeline(transaction=True)
            for command in batch_commands:
                pipe.execute_command(*command)
        wf = keys.workflow(wid, layout=layout)
        pipe.hset(wf, mapping={"state": "running", "description": self.description or "", "created_at": repr(now),
                               "total": len(order), "succeeded": 0, "failed": 0,
                               "order": payload.dumps(order), "callback_queue": self.callback_queue,
                               "keep": config.workflow_keep})
        pipe.hset(keys.workflow(wid, "state", layout), mapping=dict.fromkeys(order, "waiting"))
        pipe.hset(keys.workflow(wid, "left", layout), mapping={n: len(self.steps[n].after) for n in order})
        pipe.hset(keys.workflow(wid, "wire", layout), mapping=wire)
        pipe.hset(keys.workflow(wid, "steps", layout), mapping=specs)
        # results/errors hashes do not exist yet; the scripts give them the workflow's TTL when it ends.
        for key in keys.all_keys(wid, layout):
            pipe.expire(key, EXPIRY)
        index = [("ZADD", layout.workflows, repr(now), wid),
                 ("ZREMRANGEBYSCORE", layout.workflows, "-inf", f"({now - EXPIRY!r}")]
        if not layout.cluster:
            for command in index:
                pipe.execute_command(*command)
        # The roots are pushed in the same transaction: a creator that dies here leaves
        # either nothing or a started workflow. EVAL, not EVALSHA: a NOSCRIPT inside MULTI
        # cannot be resent. (On a cluster the script hands their jobs back: pushed below.)
        script_keys, argv = scripts.advance_args(wid, "", payload.dumps(config.wire_format.now()).decode(),
                                                 config.workflow_keep, roots, layout)
        pipe.execute_command("EVAL", scripts.ADVANCE.source, len(script_keys), *script_keys, *argv)
        replies = pipe.execute()
        if layout.cluster:
            # Steps 3 and 4 of workflow/cluster.py: the index, then the first steps' pushes.
            cluster_writer.send(redis, index)
            workflow_cluster.push(config, wid, workflow_cluster.handed(replies[-1]))
        return Workflow(wid)


def _plan_step(client: Client, step: Step, item: dict) -> dict:
    """The step's job through the push door, with its own arguments (the results of its
    dependencies go in front of them when it is pushed)."""
    from ..payload import truthy

    try:
        prepared = client.prepare(item)
    except ValueError as exc:
        raise InvalidWorkflow(f"step {step.name!r}: {exc}") from None
    if truthy(prepared.job.get("encrypt")) and step.mode != "none" and not step.signature.args:
        # The sealed argument is the last one; here that would be a result known only later.
        raise InvalidWorkflow(f"step {step.name!r}: an encrypt job's last argument is sealed when the workflow "
                              f"is built, so give it its own arguments (the results of its dependencies go in "
                              f"front of them), or make it immutable (.si())")
    if prepared.job.get("unique_for") is not None and client.config.unique_jobs and step.mode != "none":
        # The lock is keyed on the arguments as stored; a step given results has those
        # only when it is pushed, so the worker could never release the lock taken here.
        raise InvalidWorkflow(f"step {step.name!r}: a unique job (unique_for) that waits for other steps must be "
                              f"immutable (.si()): its lock is keyed on its arguments, and the results given in "
                              f"front of them are known only when it starts")
    try:
        planned = client.finish(prepared)
    except ValueError as exc:
        raise InvalidWorkflow(f"step {step.name!r}: {exc}") from None
    if planned is None:
        raise InvalidWorkflow(f"step {step.name!r}: a client middleware stopped its push (a unique job's "
                              f"duplicate?); nothing of the workflow was written")
    return planned.job
