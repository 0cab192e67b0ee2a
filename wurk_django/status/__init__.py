"""Job status and progress, read from any process (issue 47 item 2; docs/status.md).

A job keeps a status record when it asks for one: a class with ``track = True`` (or a
push with ``set(track=True)``), a Celery-style task, a ``django.tasks`` task. It is one
record per job, the results feature's (``status:<jid>``, written only by
:mod:`wurk_django.results.record`): Celery's ``AsyncResult``, the ``django.tasks``
backend's ``get_result`` and :func:`get` are three views of it.

* :func:`get` / :func:`aget`: the :class:`Status` of a job by its jid, or ``None``;
* :func:`progress`: from inside a running job, how far it is (also ``self.progress(...)``
  on a :class:`~wurk_django.job.Job`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import asdict, dataclass, field
from typing import Any

from .. import context
from ..results import record, store
from ..results.states import FINAL, of

__all__ = ["Status", "aget", "get", "get_many", "progress", "valid_id"]


def valid_id(jid: Any) -> bool:
    """Whether ``jid`` can name a status record (what :func:`get` accepts)."""
    return store.valid_id(jid)


def _when(ms: Any) -> dt.datetime | None:
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC) if isinstance(ms, int) else None


@dataclass(frozen=True)
class Status:
    """What a job's record says now. ``state`` is one of ``enqueued``, ``scheduled``,
    ``running``, ``retrying``, ``interrupted`` (stopped mid-run, it runs again),
    ``complete``, ``failed`` (ended for good: retries used up, killed, no retries) and
    ``revoked`` (will never run)."""

    jid: str
    state: str
    #: The job's class (a task's name).
    job_class: str | None = None
    #: Percent done (0 to 100) as the job last reported it, or ``None``; 100 once complete.
    progress: int | float | None = None
    #: What the job said it was doing with its last progress report ("" when it said nothing);
    #: for a debounced job a later push replaced, ``"replaced by a later push <jid>"``.
    message: str | None = None
    #: What ``perform`` returned, once ``complete`` (a tracked job's: JSON, at most 8 KB).
    result: Any = None
    #: Why ``result`` is ``None`` although the job returned something (not JSON, too large).
    result_note: str | None = None
    #: The last failed attempt's error: ``{"class", "message"}`` (message cut at 1 KB), or ``None``.
    error: dict[str, str] | None = None
    #: Why a job that died ended for good, as the death path says it: ``exhausted`` (retries
    #: used up), ``no_retry``, ``deadline`` (not started, or not retried, by its deadline),
    #: ``manual`` (killed by a person), ``poison``, ``discarded``...; ``None`` otherwise.
    reason: str | None = None
    #: Every failed attempt's error as stored (class path, message, traceback).
    errors: list[dict[str, Any]] = field(default_factory=list)
    #: Attempts started so far.
    attempts: int = 0
    enqueued_at: dt.datetime | None = None
    started_at: dt.datetime | None = None
    #: When the last attempt started.
    attempted_at: dt.datetime | None = None
    finished_at: dt.datetime | None = None
    #: When the job last reported progress.
    progress_at: dt.datetime | None = None
    #: Seconds the record is kept after each change.
    ttl: int | None = None

    @property
    def finished(self) -> bool:
        """True once the record no longer changes (``complete``, ``failed``, ``revoked``)."""
        return of(self.state) in FINAL

    def as_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (timestamps as ISO 8601 text), e.g. for an HTTP answer."""
        out = asdict(self)
        for name, value in out.items():
            if isinstance(value, dt.datetime):
                out[name] = value.isoformat()
        out["class"] = out.pop("job_class")
        out["finished"] = self.finished
        return out

    @classmethod
    def from_record(cls, jid: str, fields: dict[str, Any]) -> Status:
        """The view of a record's decoded fields (:func:`wurk_django.results.store.decode`)."""
        errors = fields.get("errors") if isinstance(fields.get("errors"), list) else []
        last = errors[-1] if errors and isinstance(errors[-1], dict) else None
        state = of(fields.get("state"))
        progress_value = fields.get("progress")
        return cls(
            jid=jid,
            state=state.value if state is not None else str(fields.get("state") or "enqueued"),
            job_class=fields.get("class"),
            progress=progress_value if isinstance(progress_value, (int, float)) else None,
            message=fields.get("message"),
            result=fields.get("return_value"),
            result_note=fields.get("result_note"),
            error=None if last is None else {"class": str(last.get("exception_class_path") or ""),
                                             "message": str(last.get("message") or "")[:1024]},
            reason=fields.get("reason") if isinstance(fields.get("reason"), str) else None,
            errors=list(errors),
            attempts=len(fields.get("worker_ids") or []),
            enqueued_at=_when(fields.get("enqueued_at")),
            started_at=_when(fields.get("started_at")),
            attempted_at=_when(fields.get("last_attempted_at")),
            finished_at=_when(fields.get("finished_at")),
            progress_at=_when(fields.get("progress_at")),
            ttl=fields.get("ttl"),
        )


def _checked(jid: Any) -> str:
    return store.check_id(jid, "jid")


def get(jid: str, *, redis: Any = None) -> Status | None:
    """The status of job ``jid``, or ``None``: it keeps no record (not tracked, never
    pushed, or its record expired). A ``jid`` no record can have raises ``ValueError``.
    One ``HGETALL`` on the Redis of :func:`wurk_django.context.redis` (``redis`` to pick
    another); a run this process keeps in memory (the testing modes) is read first."""
    _checked(jid)
    fields = store.local(jid)
    if fields is None:
        fields = store.read(context.layout_redis(redis), jid)
    return None if fields is None else Status.from_record(jid, fields)


def get_many(jids: list[str], *, redis: Any = None) -> dict[str, Status]:
    """The status of each of ``jids`` that has a record, in one round trip (ids no record
    can have are left out)."""
    wanted = [jid for jid in dict.fromkeys(jids) if store.valid_id(jid)]
    if not wanted:
        return {}
    pipe = context.layout_redis(redis).pipeline(transaction=False)
    for jid in wanted:
        pipe.hgetall(store.key(jid))
    return {jid: Status.from_record(jid, store.decode(raw)) for jid, raw in zip(wanted, pipe.execute(), strict=True) if raw}


async def aget(jid: str, *, redis: Any) -> Status | None:
    """:func:`get` on a ``redis.asyncio`` client (``redis``)."""
    _checked(jid)
    fields = store.local(jid)
    if fields is None:
        fields = await store.aread(redis, jid)
    return None if fields is None else Status.from_record(jid, fields)


def progress(percent: float, message: str | None = None, *, jid: str | None = None) -> bool:
    """From inside a running job: it is ``percent`` (0 to 100) done, doing ``message``.
    One Redis command; never raises over Redis (logged, False). A job that keeps no record
    writes nothing (False). ``jid``: report for that job, running in this process, from
    another thread. A percent outside 0..100 raises ``ValueError``."""
    return record.report_progress(percent, message, jid=jid)
