"""The one writer of result records: every change to a ``status:<id>`` hash (or to the
in-process record of a run that never reached Redis) is made here, from what happened to
the job, in the one vocabulary of :mod:`.states`.

A job keeps a record when its payload asks for one: a Celery-style task's
``result_ttl``, the ``django.tasks`` backend's ``task`` (its ``result_ttl``), or any job
class's ``track`` (:mod:`.tracking`, issue 47 item 2). Then:

* the push writes the first record in the push's own round trip (:func:`push_commands`,
  :func:`first_fields`; :func:`pushed_here` in the testing modes);
* while it runs, the job may report its progress (:func:`report_progress`: one script
  call, no read first) and a Celery task its ``update_state`` (:func:`progress`);
* on a worker, the job observer this feature installs (:func:`observe`) writes
  ``running`` as the attempt starts and, told how the run ended (the run's
  :class:`~wurk_django.outcome.Outcome` and error), writes the end: ``complete`` with
  the value the job returned (:func:`returned`), ``retrying`` with the error appended,
  ``failed`` with it when the failure ends the job (the retry rule of
  :mod:`wurk_django.server.retry`), ``interrupted`` or ``scheduled``; a run a revoke
  stopped writes no end of its own: the settlement buries it, and :func:`died` writes
  ``revoked``;
* a run the worker's stop could not interrupt (its thread asleep in C code) is put back
  on its queue by the stop; as the worker exits, :func:`stopped` writes its ``interrupted``;
* a death, wherever it happens (retries used up, a kill from the admin, a poison pill,
  a revoke, a hard time limit), reaches :func:`died`, the death handler this feature
  installs: ``failed`` (``revoked`` for a revoke) with its error, once;
* a job skipped past its ``expires`` reads ``revoked`` (:func:`expired`);
* runs in this process (``apply()``, ``testing.execute``, the inline mode) write
  through :func:`begin_here` and :meth:`Attempt.end`.

A final record (``complete``, ``failed``, ``revoked``) is never rewritten by the end of
a run: a thread the watchdog gave up on that comes back later changes nothing.

Redis unreachable for a record's write loses that write (logged), never the job: the
job's own outcome is booked by the worker as usual.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import sys
import traceback as tb
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

import redis as redis_lib

from .. import context, payload
from ..outcome import Outcome
from ..redis.scripts import lua
from . import store
from .states import FINAL, State, of

logger = logging.getLogger("wurk_django.worker")

_UNREACHABLE = (redis_lib.ConnectionError, redis_lib.TimeoutError)
#: The attempt this thread (or asyncio task) runs, for :func:`returned` and :func:`died`.
_current: ContextVar[Attempt | None] = ContextVar("wurk_result_attempt", default=None)
#: Attempts running now, by jid: a death or a retry booked by another thread (the watchdog
#: settling a run it gave up on) finds the attempt it settles, so the run's own end, if its
#: thread ever comes back, changes nothing.
_live: dict[str, Attempt] = {}
_worker_id: str | None = None
#: How a run ends when its job goes back to its queue to run again (a stop, a pause, a
#: job handed back unrun): its record reads ``interrupted`` (django.tasks: READY).
PUT_BACK = frozenset({Outcome.INTERRUPTED, Outcome.PAUSED, Outcome.GIVEN_BACK})


# -- which jobs keep a record --------------------------------------------------------


def ttl_of(job: dict) -> int | None:
    """Seconds the record of ``job`` is kept after each change, or ``None``: it keeps none.

    A Celery-style task says so with ``result_ttl``, a ``django.tasks`` task with its
    ``task`` metadata, any other job pushed with ``track`` (:mod:`.tracking`) with ``track``."""
    ttl = job.get("result_ttl")
    if ttl is None:
        ttl = job.get("track")
        if ttl is True:  # written by a client that does not normalize it: this process's default
            ttl = context.config().track_ttl
        elif ttl is None:
            meta = job.get("task")
            if not isinstance(meta, dict):
                return None
            ttl = meta.get("result_ttl") or store.DEFAULT_TTL
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 1:
        return None
    return ttl


def keeps_record(job: Any) -> bool:
    return isinstance(job, dict) and ttl_of(job) is not None and store.valid_id(job.get("jid"))


def set_worker_id(value: str | None) -> None:
    """Let the worker runtime name itself in a record's ``worker_ids`` (e.g. its process identity)."""
    global _worker_id
    _worker_id = value[:64] if value else None


def worker_id() -> str:
    return _worker_id or f"{socket.gethostname()}:{os.getpid()}"[:64]


def error_of(exc: BaseException) -> dict[str, Any]:
    """One failed attempt as stored: its class path and traceback (what ``django.tasks``
    reads), its message and, when JSON carries them, its arguments (to rebuild it)."""
    kind = type(exc)
    error: dict[str, Any] = {
        "exception_class_path": f"{kind.__module__}.{kind.__qualname__}",
        "traceback": "".join(tb.format_exception(exc)),
        "message": str(exc),
    }
    try:
        args = payload.loads(payload.dumps(list(exc.args)))
    except (TypeError, ValueError):
        args = None
    if args is not None and args == list(exc.args):
        error["args"] = args
    return error


# -- the push --------------------------------------------------------------------------


def first_fields(job: dict) -> dict[str, Any]:
    """The record a push writes for a job that asks for one: it is waiting."""
    return {"state": State.SCHEDULED if "at" in job else State.ENQUEUED, "class": job.get("class"),
            "enqueued_at": payload.now_ms(), "ttl": ttl_of(job), **_call_of(job)}


def _call_of(job: dict) -> dict[str, Any]:
    """What a Celery-style call is called with (its ``AsyncResult.args``/``.kwargs``)."""
    if "result_ttl" not in job or isinstance(job.get("task"), dict):
        return {}
    return {"args": list(job.get("args") or []), "kwargs": dict(job.get("kwargs") or {})}


def waiting_state(scheduled: bool) -> State:
    return State.SCHEDULED if scheduled else State.ENQUEUED


def push_commands(result_id: str, fields: dict[str, Any], ttl: int) -> list[tuple[Any, ...]]:
    """The commands writing the first record, for the push's own round trip, so a reader
    never sees a pushed task without one."""
    return store.commands(result_id, fields, ttl)


def pushed_here(result_id: str, fields: dict[str, Any]) -> None:
    """The first record of a job the testing modes keep in this process."""
    store.update_local(result_id, fields)


# -- an attempt ------------------------------------------------------------------------


class Attempt:
    """One run of a job that keeps a record, from its start to its end."""

    __slots__ = ("jid", "ttl", "job", "redis", "fields", "value", "done", "error_written")

    def __init__(self, job: dict, ttl: int, redis: Any) -> None:
        self.jid: str = job["jid"]
        self.ttl = ttl
        self.job = job
        self.redis = redis  # None: this process's memory
        self.fields: dict[str, Any] = {}
        self.value: Any = None
        self.done = False
        self.error_written = False

    def load(self) -> dict[str, Any] | None:
        if self.redis is None:
            return store.local(self.jid)
        return store.read(self.redis, self.jid)

    def save(self, fields: dict[str, Any], drop: tuple[str, ...] = ()) -> None:
        self.fields.update(fields)
        for name in drop:
            self.fields.pop(name, None)
        if self.redis is None:
            store.update_local(self.jid, fields, drop=drop)
        else:
            _write(store.write, self.redis, self.jid, fields, self.ttl, drop=drop)

    # -- the start and the end -------------------------------------------------------

    def start(self) -> None:
        """``running``: this attempt's start, this worker's id appended."""
        try:
            fields = self.load()
        except _UNREACHABLE as exc:
            _lost(self.jid, exc)
            fields = None
        if fields is None:
            # Expired while waiting for a retry, or pushed in a testing mode: start again from the payload.
            fields = _from_payload(self.job, self.ttl)
        self.fields = fields
        now = payload.now_ms()
        update = {**fields, "state": State.RUNNING, "last_attempted_at": now,
                  "worker_ids": [*(fields.get("worker_ids") or []), worker_id()]}
        update.setdefault("started_at", now)
        self.save(update, drop=("finished_at", "custom_state", "meta", *store.PROGRESS_FIELDS))

    def end(self, outcome: Any, error: BaseException | None) -> None:
        """Write how the run ended, once; never over a record that is already final."""
        if _live.get(self.jid) is self:
            del _live[self.jid]
        if self.done:
            return
        self.done = True
        if outcome is not Outcome.INTERRUPTED and _revoked_run():
            # Stopped by a revoke, however the job ended after the soft stop: the settlement
            # buries it as revoked, and the death handler (died) writes ``revoked`` then. A
            # ``failed`` written here first would be final, and stay.
            return
        try:
            fields = self.load()
        except _UNREACHABLE as exc:
            _lost(self.jid, exc)
            return
        if fields is not None and of(fields.get("state")) in FINAL:
            return  # a death seen elsewhere (the watchdog, a revoke) settled it first
        if outcome in PUT_BACK and self._overtaken(fields):
            return
        update, drop = self._ending(outcome, error, fields or self.fields)
        if update:
            self.save(update, drop=drop)

    def put_back(self) -> None:
        """The worker stopped while this attempt's thread was still in its run (asleep in C
        code, out of reach of the stop's interruption): the stop put the job back on its
        queue, so the record reads ``interrupted``, as a run cut short on its own thread
        does. Once: the thread, if it ever comes back, changes nothing."""
        _settled(self)
        if self.done:
            return
        self.done = True
        try:
            fields = self.load()
        except _UNREACHABLE as exc:
            _lost(self.jid, exc)
            return
        if fields is not None and (of(fields.get("state")) in FINAL or self._overtaken(fields)):
            return
        self.save({"state": State.INTERRUPTED})

    def _overtaken(self, fields: dict[str, Any] | None) -> bool:
        """Whether a later attempt started since this one (the job put back was taken by
        another worker before this end was written): that attempt's record is not ours to
        change."""
        if not fields:
            return False
        ours = self.fields.get("last_attempted_at")
        return ours is not None and fields.get("last_attempted_at") not in (None, ours)

    def _ending(self, outcome: Any, error: BaseException | None,
                fields: dict[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
        now = payload.now_ms()
        if outcome is Outcome.SUCCEEDED:
            update = {"state": State.COMPLETE, "return_value": self.value, "finished_at": now}
            if "track" in self.job and "result_ttl" not in self.job and "task" not in self.job:
                update.update(kept_value(self.value))  # a tracked job's value: JSON, and capped
            if "progress" in fields:
                update["progress"] = 100  # done: a bar that stopped at 90 % reads full
            return update, ()
        if outcome is Outcome.RESCHEDULED:
            return {"state": State.SCHEDULED}, ()
        if outcome in PUT_BACK:
            return {"state": State.INTERRUPTED}, ()
        if outcome is Outcome.FAILED:
            # Told before the retry layer booked it: the retry rule says what it will do.
            final = _ends_job(self.job, error)
        elif outcome is Outcome.RETRIED:
            final = False
        else:  # DEAD, DISCARDED
            final = True
        update: dict[str, Any] = {"state": State.FAILED if final else State.RETRYING}
        if final:
            update["finished_at"] = now
        if error is not None and not self.error_written:
            self.error_written = True
            shown = _shown_error(error)
            update["errors"] = [*(fields.get("errors") or []), error_of(shown)]
            if self.redis is None:
                update["exception"] = shown  # run here: the very exception, for apply().get()
        return update, ("finished_at",) if not final else ()


#: The most of a tracked job's return value a record keeps, in bytes of JSON (Ruby wurk's ``track``
#: keeps 8 KB); a larger value, or one JSON cannot carry, is noted instead of stored.
RESULT_LIMIT = 8192


def kept_value(value: Any) -> dict[str, Any]:
    """The ``return_value`` of a tracked job's record: the value when JSON carries it within
    :data:`RESULT_LIMIT` bytes; else ``None`` and a ``result_note`` saying why (the job
    succeeded all the same)."""
    try:
        size = len(payload.dumps(value))
    except (TypeError, ValueError) as exc:
        return {"return_value": None, "result_note": f"not kept: not JSON ({type(value).__name__}: {exc})"[:300]}
    if size > RESULT_LIMIT:
        return {"return_value": None, "result_note": f"not kept: {size} bytes of JSON, over the {RESULT_LIMIT}-byte limit"}
    return {"return_value": value}


def _revoked_run() -> bool:
    """Whether the worker's run being settled now was stopped by a revoke. Read only where
    the worker's run module is loaded (a worker): a process that only pushes has no runs."""
    runs = sys.modules.get("wurk_django.server.run.run")
    run = runs.current() if runs is not None else None
    return run is not None and run.revoked is not None


def _from_payload(job: dict, ttl: int) -> dict[str, Any]:
    enqueued = payload.epoch_seconds(job.get("enqueued_at") or job.get("created_at"))
    fields: dict[str, Any] = {"class": job.get("wrapped") or job.get("class"), "errors": [], "worker_ids": [],
                              "ttl": ttl, "enqueued_at": int(enqueued * 1000) if enqueued else payload.now_ms()}
    fields.update(_call_of(job))
    if isinstance(job.get("task"), dict):
        # The django.tasks backend's task: its metadata and its call, as its push wrote them.
        args = job.get("args") or [[], {}]
        fields.update({"task": job["task"], "args": list(args[0]) if args else [],
                       "kwargs": dict(args[1]) if len(args) > 1 else {}})
    return fields


def _ends_job(job: dict, error: BaseException | None) -> bool:
    """Whether the retry layer will end the job over this failure (the rule it applies)."""
    if error is None:
        return True
    from ..server import retry  # on a worker only

    ctx = context.current()
    job_class = ctx.job_class
    if "retry" not in job and job_class is not None:
        job = {**job, "retry": job_class.get_options().get("retry", ctx.config.default_job_options.get("retry"))}
    if retry.caused_by_shutdown(error):
        return False
    return retry.exhausted(job, retry.limit_of(job, ctx.config.max_retries, job_class, error))


def _shown_error(error: BaseException) -> BaseException:
    """The error a record shows for a failure: a job class may name another (a Celery
    ``Retry`` shows the error it retries over), with its ``result_error(exc)`` hook."""
    ctx = context.running()
    job_class = ctx.job_class if ctx is not None else None
    hook = getattr(job_class, "result_error", None)
    return hook(error) if hook is not None else error


# -- on a worker -----------------------------------------------------------------------


def observe(job: dict, queue: str) -> Callable[[Any, BaseException | None, float], None] | None:
    """The job observer: ``running`` now, and the end once told how the run ended."""
    if ("result_ttl" not in job and "task" not in job and "track" not in job) or not keeps_record(job):
        return None  # the common job: no record, nothing to do
    ctx = context.current()
    attempt = Attempt(job, ttl_of(job), ctx.redis)  # type: ignore[arg-type]
    _current.set(attempt)
    _live[attempt.jid] = attempt
    attempt.start()

    def end(outcome: Any, error: BaseException | None, elapsed_ms: float) -> None:
        if attempt.value is None:
            attempt.value = ctx.value  # what perform returned (a Celery task tells returned() itself)
        attempt.end(outcome, error)

    return end


def begin_here(job: dict, *, in_memory: bool) -> Attempt | None:
    """Start the record of a run in this process (not fetched by a worker): kept in this
    process's memory (``in_memory``, where ``AsyncResult`` looks first) or in the Redis
    of :func:`wurk_django.context.current`. The caller ends it with :meth:`Attempt.end`."""
    if not keeps_record(job):
        return None
    attempt = Attempt(job, ttl_of(job), None if in_memory else context.current().redis)  # type: ignore[arg-type]
    _current.set(attempt)
    attempt.start()
    return attempt


def current() -> Attempt | None:
    """The attempt this thread runs, if its job keeps a record."""
    return _current.get()


def returned(value: Any) -> None:
    """The job's code returned ``value``: the record says so once the run ends well."""
    attempt = _current.get()
    if attempt is not None:
        attempt.value = value


# -- ends decided elsewhere --------------------------------------------------------------


def died(job: dict, exc: BaseException, reason: str) -> None:
    """Death handler: the job ended for good (wherever: its own retries, the admin, the
    reaper, a revoke, the watchdog). ``failed``, or ``revoked`` for a revoke, with its
    error unless this thread's run already wrote it."""
    if not keeps_record(job):
        return
    jid = job["jid"]
    attempt = _attempt_of(jid)
    mine = attempt is not None
    if mine:
        attempt.done = True  # the run's own end changes nothing after its death
        _settled(attempt)
    redis = context.current().redis
    fields = store.read(redis, jid) or _from_payload(job, ttl_of(job))  # type: ignore[arg-type]
    if of(fields.get("state")) in FINAL:
        return
    update: dict[str, Any] = {"state": State.REVOKED if "revoked_by" in job else State.FAILED,
                              "finished_at": payload.now_ms(), "reason": reason}
    if not (mine and attempt.error_written):
        update["errors"] = [*(fields.get("errors") or []), error_of(exc)]
    _write(store.write, redis, jid, {**fields, **update} if "state" not in fields else update, ttl_of(job))


def retried(sender: Any, job: dict, exception: BaseException | None = None, **kwargs: Any) -> None:
    """Receiver of ``job_retried``: the retry layer booked another attempt. The run's own
    end says so too; this covers a retry booked by another thread than the run's (the
    watchdog settling a run past its hard time limit), whose thread may come back later."""
    if not keeps_record(job):
        return
    attempt = _attempt_of(job["jid"])
    if attempt is None or attempt.done:
        return  # the run's end wrote it already
    attempt.done = True
    _settled(attempt)
    redis = context.current().redis
    fields = store.read(redis, job["jid"]) or {}
    if of(fields.get("state")) in FINAL:
        return
    update: dict[str, Any] = {"state": State.RETRYING}
    if exception is not None and not attempt.error_written:
        attempt.error_written = True
        update["errors"] = [*(fields.get("errors") or []), error_of(_shown_error(exception))]
    _write(store.write, redis, job["jid"], update, ttl_of(job), drop=("finished_at",))


def stopped(sender: Any, **kwargs: Any) -> None:
    """Receiver of ``worker_exit``: the worker stopped. An attempt still running here is
    one whose thread the stop could not interrupt; the stop put its job back on its queue
    (or left it for the reaper to put back), so it will run again: its record reads
    ``interrupted`` (READY) instead of ``running`` until it does."""
    for attempt in list(_live.values()):
        attempt.put_back()


def _settled(attempt: Attempt) -> None:
    if _live.get(attempt.jid) is attempt:
        del _live[attempt.jid]


def _attempt_of(jid: str) -> Attempt | None:
    """The attempt of ``jid`` running now anywhere in this process, or the one this thread ran last."""
    attempt = _live.get(jid)
    if attempt is not None:
        return attempt
    attempt = _current.get()
    return attempt if attempt is not None and attempt.jid == jid else None


def buried_elsewhere(redis: Any, job: dict, error: dict[str, Any], died_at_ms: int) -> bool:
    """A process that does not keep records (a Ruby Sidekiq) buried ``job``: its open
    record reads ``failed`` with ``error``. False when there was nothing to mark."""
    if not keeps_record(job):
        return False
    fields = store.read(redis, job["jid"])
    if fields is None or of(fields.get("state")) in FINAL:
        return False  # expired, never written, or already final (our process that buried it wrote it)
    errors = fields.get("errors")
    store.write(redis, job["jid"], {"state": State.FAILED, "errors": [*(errors if isinstance(errors, list) else []),
                                                                        error], "finished_at": died_at_ms},
                int(fields.get("ttl") or store.DEFAULT_TTL))
    return True


def expired(sender: Any, job: dict, **kwargs: Any) -> None:
    """Receiver of ``job_expired``: the worker skipped the job past its ``expires``, so it
    will never run: ``revoked``, as Celery's reads."""
    if not keeps_record(job):
        return
    attempt = _attempt_of(job["jid"])
    if attempt is not None:
        attempt.done = True
    _write(store.write, context.current().redis, job["jid"], {"state": State.REVOKED,
                                                              "finished_at": payload.now_ms()}, ttl_of(job))


def progress(job: dict, result_id: str, state: str, meta: Any, *, in_memory: bool) -> None:
    """A Celery task's ``update_state``: a custom state (``PROGRESS``) and its JSON ``meta``.
    A ``meta`` with Celery's usual ``current`` and ``total`` counts is the record's progress
    too (``percent``, and ``message`` from its ``message`` or ``status``), so
    ``wurk_django.status`` and the admin read the same bar."""
    ttl = ttl_of(job)
    if ttl is None:
        return
    fields = {"custom_state": state, "meta": payload.dumps(meta).decode(), **_progress_of_meta(meta)}
    if in_memory:
        store.update_local(result_id, fields)
    else:
        _write(store.write, context.current().redis, result_id, fields, ttl)


def _progress_of_meta(meta: Any) -> dict[str, Any]:
    if not isinstance(meta, dict):
        return {}
    current, total = meta.get("current"), meta.get("total")
    if not (_number(current) and _number(total)) or total <= 0:
        return {}
    fields: dict[str, Any] = {"progress": _rounded(min(max(100.0 * current / total, 0.0), 100.0)),
                              "progress_at": payload.now_ms()}
    text = meta.get("message", meta.get("status"))
    if isinstance(text, str):
        fields["message"] = text[:MESSAGE_LIMIT]
    return fields


# -- progress from inside a run (issue 47 item 2) ------------------------------------------

#: The longest progress message kept, in characters.
MESSAGE_LIMIT = 1024
_PROGRESS = lua("results/lua/progress")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _rounded(percent: float) -> int | float:
    return int(percent) if float(percent).is_integer() else round(percent, 2)


def report_progress(percent: float, message: str | None = None, *, jid: str | None = None) -> bool:
    """Write how far the running job is (``percent``, 0 to 100) and what it does now
    (``message``) into its record: one command (``progress.lua``: three fields and the
    expiry, only while the record is open), no read first. ``jid``: the job's (any thread
    of this process may report for a job running here); by default the one this thread
    runs. False when nothing was written: the job keeps no record, it is not running here,
    or Redis did not answer (logged; the job goes on). A bad ``percent`` or ``message``
    raises at the call site."""
    if not _number(percent) or not 0 <= percent <= 100:
        raise ValueError(f"progress percent must be a number from 0 to 100, not {percent!r:.60}")
    if message is not None and not isinstance(message, str):
        raise TypeError(f"progress message must be a str or None, not {type(message).__name__}: {message!r:.60}")
    attempt = _current.get() if jid is None else _attempt_of(jid)
    if attempt is None or attempt.done:
        return False
    fields = {"progress": _rounded(float(percent)), "message": (message or "")[:MESSAGE_LIMIT],
              "progress_at": payload.now_ms()}
    if attempt.redis is None:
        store.update_local(attempt.jid, fields)
        return True
    try:
        return bool(_PROGRESS(attempt.redis, [store.key(attempt.jid)],
                              [attempt.ttl, *(part for pair in fields.items() for part in pair)]))
    except redis_lib.RedisError as exc:
        _lost(attempt.jid, exc)
        return False


def forget(redis: Any, result_id: str) -> None:
    """Delete the record now, here and in Redis."""
    store.forget_local(result_id)
    if store.valid_id(result_id):
        store.delete(redis, result_id)


def _write(write: Callable[..., None], redis: Any, jid: str, *args: Any, **kwargs: Any) -> None:
    try:
        write(redis, jid, *args, **kwargs)
    except _UNREACHABLE as exc:
        _lost(jid, exc)


def _lost(jid: str, exc: BaseException) -> None:
    logger.warning("the result record of job %s was not updated (%s: %s)", jid, type(exc).__name__, exc)
