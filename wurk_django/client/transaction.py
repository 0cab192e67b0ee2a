"""Pushing after the database transaction commits (CORE-091, DJ-030).

The jid is assigned before the transaction ends, so the caller gets it at once;
the push itself runs in ``transaction.on_commit`` and never happens if the
transaction rolls back. Outside a transaction the push is immediate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import TYPE_CHECKING

from django.db import transaction

from .. import payload
from .planning import NONE, Companions, Prepared

if TYPE_CHECKING:
    from .push import Client


# Set while pushes must happen now even inside a transaction: a batch's jobs() block
# (deferring them to the commit would push them after the block, outside the batch).
_immediate: ContextVar[bool] = ContextVar("wurk_immediate_pushes", default=False)


@contextlib.contextmanager
def immediate_pushes() -> Iterator[None]:
    """Inside the block, pushes are never deferred to a transaction's commit."""
    token = _immediate.set(True)
    try:
        yield
    finally:
        _immediate.reset(token)


def push_on_commit(client: Client, item: dict, using: str | None = None,
                   companions: Companions = NONE) -> str | None:
    """:meth:`Client.push` at the commit, through the same door: the job is prepared and
    its arguments checked now (a bad option or argument raises here, with the error an
    immediate push raises), and the jid is returned now; the client middleware and the
    write run at the commit (nothing on rollback)."""
    if _immediate.get():
        return client.push(item, companions)
    item = dict(item)
    item.setdefault("jid", payload.new_jid())
    prepared = client.prepare(item, companions)
    client.check(prepared)
    transaction.on_commit(lambda: finish_and_write(client, prepared), using=using)
    return prepared.job["jid"]


def finish_and_write(client: Client, prepared: Prepared) -> str | None:
    """The commit's half of a deferred push: the middleware, the argument check, the write."""
    planned = client.finish(prepared)
    return None if planned is None else client.write(planned)


def push_bulk_on_commit(client: Client, item: dict, using: str | None = None) -> list[str | None]:
    """:meth:`Client.push_bulk` at the commit: the jids are assigned and returned now,
    every option and argument list is checked now (bad input raises at the call
    site), and nothing is pushed if the transaction rolls back. A job that client
    middleware drops at the commit (a unique job's duplicate) keeps the jid
    returned here but is not pushed, as with a single deferred push."""
    if _immediate.get():
        return client.push_bulk(item)
    client.check_bulk(item)
    item = {**item, "jids": [payload.new_jid() for _ in item["args"]]}
    transaction.on_commit(lambda: client.push_bulk(item), using=using)
    return list(item["jids"])

