"""Workflows on a Redis Cluster (issue 46 item 3): the steps that span hash slots, in their order.

On one server a workflow's start (its keys, its step batches, its first steps' pushes)
is one ``MULTI``, and moving it on after a step (``advance.lua``) records the step and
pushes the steps that waited only for it in one script. On a cluster a workflow's keys
share the slot ``{wf:<id>}``, each step batch has its own ``{b:<bid>}`` and each queue
its own ``{q:<name>}`` (:mod:`wurk_django.redis.cluster_layout`), so each of those steps
becomes several, in an order chosen so that a crash between them loses no step and
pushes none twice:

**Start: the step batches, then the workflow, then the first pushes.**

1. every step's batch, with the step's jid as its one member from the start
   (single-key commands, each in its batch's slot), all answered;
2. the workflow's keys and ``advance.lua`` for the steps that wait for nothing, one
   ``MULTI`` in ``{wf:<id>}``: the workflow exists with those steps ``enqueued``, and the
   script hands their jobs back instead of pushing them (:func:`push`);
3. the index ``{wurk}:workflows``;
4. the pushes (:func:`push`).

A crash after 1 leaves step batches nobody refers to (they expire); after 2 or 3, a
workflow whose first steps are ``enqueued`` but not pushed: :meth:`Workflow.resume()
<wurk_django.workflow.Workflow.resume>` pushes them (a step already pushed is not
pushed again, see below).

**Moving on: the workflow's record, then the pushes.** ``advance.lua`` records the step
as succeeded and marks the steps that waited only for it ``enqueued``, in
``{wf:<id>}``, and returns their jobs, together with those of the step's dependents
already ``enqueued`` (a replay); then each job is pushed by the batches'
``claim_and_push.lua`` in the slot of its queue: ``SET NX`` of the marker
``{q:<queue>}:wf-pushed:<id>:<step>`` and the push, one step. The callback job that
runs this (the step batch's ``success`` callback) is run again after a crash (its
worker's private list is recovered), and the replay hands the same steps back, which
the markers let through once: a step is pushed once, never lost.

Every push goes through the push door's cluster writer
(:class:`~wurk_django.client.writer.Writer`, the claim as the job's ``via``): the jobs were
planned through the door (validation, client middleware) when the workflow was built.
"""

from __future__ import annotations

from typing import Any

from ..batch import scripts as batch_scripts
from ..client.operations import Enqueue, wake_args
from ..conf import Config
from ..redis.cluster_layout import CLUSTER
from ..text import to_text

#: How long the marker of a pushed step is kept: as long as a workflow may run.
MARKER_TTL = batch_scripts.DEFAULT_EXPIRY


def handed(reply: list[Any]) -> list[tuple[str, str, bytes]]:
    """The ``(step, queue, job)`` triples ``advance.lua`` handed back after its two counts."""
    rest = reply[2:]
    return [(to_text(rest[i]), to_text(rest[i + 1]), rest[i + 2] if isinstance(rest[i + 2], bytes)
             else str(rest[i + 2]).encode()) for i in range(0, len(rest), 3)]


def push(config: Config, wid: str, jobs: list[tuple[str, str, bytes]]) -> None:
    """Push each handed step's job once: claim its marker and push it, one script in its
    queue's slot, through the cluster writer (the module docstring says why)."""
    if not jobs:
        return
    from ..client.writer import Writer

    ops = [Enqueue(queue, raw, None, via=batch_scripts.CLAIM_AND_PUSH.command(
        [CLUSTER.workflow_pushed(queue, wid, step), CLUSTER.queue(queue), CLUSTER.wake(queue)],
        [MARKER_TTL, *wake_args(), raw])) for step, queue, raw in jobs]
    # The jobs were planned through the door when the workflow was built: no write hooks again.
    Writer(config).write_operations(ops, hooks=False)


def pushed(client: Any, wid: str, step: str, queue: str) -> bool:
    """Whether the push of ``step`` was claimed (its marker, in its queue's slot)."""
    return bool(client.exists(CLUSTER.workflow_pushed(queue, wid, step)))
