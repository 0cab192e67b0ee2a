"""What a batch needs to know about the code running right now.

Held in ``ContextVar``s rather than thread-locals, so threads and asyncio tasks
each see their own (PRO-006); every setter hands back a token and the caller
restores the previous value on the way out.

* the batch whose ``jobs()`` block is open (pushes are stamped with its bid);
* that block's buffer (the write operations of its pushes, waiting to be written);
* the bids with an open block in this context (only the outermost block of a
  bid takes a hold);
* the jid of the job this context is running (a hold taken inside a job is
  named after it, so a re-run after a crash takes the same hold again).
"""

from __future__ import annotations

from contextvars import ContextVar, Token
from typing import TYPE_CHECKING

from .. import context as job_context

if TYPE_CHECKING:
    from ..client.operations import Operation
    from .batch import Batch

current_batch: ContextVar[Batch | None] = ContextVar("wurk_batch", default=None)
current_buffer: ContextVar[Buffer | None] = ContextVar("wurk_batch_buffer", default=None)
open_bids: ContextVar[frozenset[str]] = ContextVar("wurk_batch_open", default=frozenset())
current_jid: ContextVar[str | None] = ContextVar("wurk_batch_job", default=None)


class Buffer:
    """Write operations (pushes through the batch's scripts) of one ``jobs()`` block,
    waiting to be sent.

    ``autoflush``: ``None`` keeps everything until the block ends; ``N`` sends
    them every ``N`` jobs, in the round trip of the push that reached ``N``.
    """

    __slots__ = ("bid", "autoflush", "operations")

    def __init__(self, bid: str, autoflush: int | None) -> None:
        self.bid = bid
        self.autoflush = autoflush
        self.operations: list[Operation] = []

    def add(self, operations: list[Operation]) -> list[Operation]:
        """Keep ``operations``; returns what must be sent now (the whole buffer when full)."""
        self.operations.extend(operations)
        if self.autoflush is not None and len(self.operations) >= self.autoflush:
            return self.take()
        return []

    def take(self) -> list[Operation]:
        taken, self.operations = self.operations, []
        return taken


def job_jid() -> str | None:
    """The jid of the job running here: set by the batch middleware for a batch job, else
    the running job's (its context, which the worker and ``perform_inline`` make current)."""
    jid = current_jid.get()
    if jid is not None:
        return jid
    running = job_context.running()
    job = running.job if running is not None else None
    return job.get("jid") if job else None


def set_batch(batch: Batch | None, buffer: Buffer | None) -> tuple[Token, Token]:
    return current_batch.set(batch), current_buffer.set(buffer)


def restore(tokens: tuple[Token, Token]) -> None:
    current_batch.reset(tokens[0])
    current_buffer.reset(tokens[1])
