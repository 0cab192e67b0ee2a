"""``self.request``: what a running task knows about its own call, as Celery names it."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field
from typing import Any

from .. import payload


def retries_of(job: dict) -> int:
    """Retries before this run: 0 on the first run. The payload has no ``retry_count``
    until the first failure is booked (then 0), so the n-th retry carries n - 1."""
    count = job.get("retry_count")
    return 0 if count is None else max(int(count) + 1, 0)


@dataclass
class Request:
    """The call being run: ``id`` (the jid), ``task`` (its name), ``args``, ``kwargs``,
    ``retries`` (0 on the first run), ``queue``, ``eta`` and ``expires`` (epoch seconds
    or ``None``), ``is_eager`` (run in this process by ``apply()`` or a testing mode),
    ``hostname``, ``delivery_info``, ``headers`` (the call's custom headers) and ``bid``
    (the batch, if any)."""

    id: str | None = None
    task: str | None = None
    args: list = field(default_factory=list)
    kwargs: dict = field(default_factory=dict)
    retries: int = 0
    queue: str | None = None
    eta: float | None = None
    expires: float | None = None
    is_eager: bool = False
    called_directly: bool = False
    hostname: str = field(default_factory=socket.gethostname)
    bid: str | None = None
    delivery_info: dict[str, Any] = field(default_factory=dict)
    #: The call's custom headers (``apply_async(headers=...)``, or set by a
    #: ``before_task_publish`` receiver); ``{}`` when it has none.
    headers: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_payload(cls, job: dict, *, is_eager: bool) -> Request:
        queue = job.get("queue")
        return cls(id=job.get("jid"), task=job.get("class"), args=list(job.get("args") or []),
                   kwargs=dict(job.get("kwargs") or {}), retries=retries_of(job), queue=queue,
                   eta=job.get("at"), expires=job.get("expiry"), is_eager=is_eager, bid=job.get("bid"),
                   headers=dict(job.get("headers") or {}),
                   delivery_info={"routing_key": queue, "queue": queue, "redelivered": payload.truthy(
                       job.get("retry_count") is not None)})
