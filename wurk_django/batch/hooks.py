"""The write hook: a batch job is pushed and registered in its batch in one script.

Each :class:`~wurk_django.client.operations.Enqueue` or ``schedule``
:class:`~wurk_django.client.operations.Schedule` of a job carrying a ``bid`` gets a
``via``: ``push.lua`` / ``schedule.lua``, which register the jid (total, pending,
expiry) and push in one atomic step (``push.lua`` with the shared push snippet, so
idle fetchers are woken as by any push). The operation carries the job and the
exact bytes written, so nothing is matched by its bytes and a job changed by an
earlier hook is registered as written. A ``NOSCRIPT`` reply means the script did
not run at all, so the writer's resend as ``EVAL`` can neither lose nor double a
registration. A jid already registered (a retry, a scheduled promotion, a retry
from the morgue) is pushed without being counted again.

Inside an open ``jobs()`` block the operations for that batch are not sent yet:
they wait in the block's buffer (see :class:`~wurk_django.batch.context.Buffer`).
"""

from __future__ import annotations

from dataclasses import replace

from .. import keys
from ..client.operations import Enqueue, Extra, Operation, Schedule
from . import context, scripts


def _bid(op: Operation) -> str | None:
    """The batch of a job this hook writes its own way, or None."""
    if type(op) is Extra or op.via is not None or op.job is None:
        return None
    bid = op.job.get("bid")
    if not bid or (type(op) is Schedule and op.into != keys.SCHEDULE):
        return None  # retry booking and the dead set do not change what the batch counts
    return str(bid)


def write_hook(ops: list[Operation]) -> list[Operation]:
    """Give every batch job's push the script that registers it; buffer those of an open block."""
    for op in ops:
        # A quick look first (this runs on every push): a job with a bid at all.
        if type(op) is not Extra and op.job is not None and op.job.get("bid"):
            break
    else:
        return ops  # the usual case: nothing of a batch's
    buffer = context.current_buffer.get()
    out: list[Operation] = []
    for op in ops:
        bid = _bid(op)
        if bid is None:
            out.append(op)
            continue
        jid = op.job["jid"]
        if type(op) is Enqueue:
            op = replace(op, via=scripts.push_command(bid, op.queue, jid, op.raw, op.front))
        else:
            op = replace(op, via=scripts.schedule_command(bid, op.at, jid, op.raw))
        if buffer is not None and bid == buffer.bid:
            out += buffer.add([op])
        else:
            out.append(op)
    return out
