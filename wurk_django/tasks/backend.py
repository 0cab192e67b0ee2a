"""``WurkBackend``: Django's Tasks framework on wurk queues (DJ-010..DJ-024).

Each enqueue pushes one Sidekiq-format job::

    {"class": "wurk_django.tasks.TaskJob", "wrapped": "shop.tasks.send_receipt",
     "display_class": "shop.tasks.send_receipt", "queue": "default",
     "args": [[42], {"copy": true}], "jid": "<TaskResult.id>", "retry": true,
     "task": {"priority": 0, "queue_name": "default", "backend": "default", ...}}

and writes the first result record (:mod:`wurk_django.results.record`) in the same round trip.

Priority is two-level (DJ-015): a task with ``priority > 0`` goes to the end
of its queue that workers take from next; every other priority is pushed
behind the waiting jobs, as Sidekiq pushes. The value itself is kept in the
payload and on ``TaskResult.task``. A deferred task (``run_after``) waits in
the ``schedule`` set and is queued normally when due, whatever its priority.

OPTIONS:

``RESULT_TTL``        seconds a result is kept after its last change (86400)
``RETRY``             Sidekiq ``retry`` for tasks without their own: True
                      (``WURK["MAX_RETRIES"]``), an attempt count, or False
``ENQUEUE_ON_COMMIT`` inside ``atomic()``, push when the transaction commits and
                      never on rollback; outside one, at once (default: True, unless
                      ``WURK["ENQUEUE_ON_COMMIT"]`` says otherwise). False: at once always
``DATABASE``          the database alias whose transaction that is ("default")
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.core import checks
from django.db import transaction

from .. import context, payload
from .. import deadline as deadlines
from ..client.planning import Companions, Planned
from ..client.push import Client
from ..conf import QUEUE_NAME, QUEUE_NAME_RULE
from ..errors import RedisClusterError
from ..redis.connection import async_redis
from ..results.record import push_commands, waiting_state
from . import results
from .compat import (
    DEFAULT_TASK_BACKEND_ALIAS,
    DEFAULT_TASK_PRIORITY,
    DEFAULT_TASK_QUEUE_NAME,
    BaseTaskBackend,
    InvalidTask,
    Task,
    TaskResult,
    TaskResultDoesNotExist,
    TaskResultStatus,
    task_enqueued,
)

OPTION_NAMES = ("RESULT_TTL", "RETRY", "ENQUEUE_ON_COMMIT", "DATABASE")


class InvalidDeadline(InvalidTask, ValueError):
    """A task's ``deadline`` or ``deadline_action`` is unusable: Django's ``InvalidTask``
    for code that catches that, and the ``ValueError`` every other push raises for it."""


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class WurkTask(Task):
    """A ``Task`` with a per-task Sidekiq ``retry`` (DJ-022) and a ``deadline``.

    ``None`` uses the backend's ``OPTIONS["RETRY"]``. Django 6.1's and the
    backport's ``@task(retry=3)`` build one when the backend is ``WurkBackend``
    (both hand extra keywords to ``task_class``); on any version :func:`task` does.

    ``deadline`` (an aware datetime or epoch seconds, issue 47 item 5) is given per
    call with :meth:`using`: ``send.using(deadline=at).enqueue(...)``. A task not
    started by then is not run (its result reads ``FAILED``); one still running then is
    stopped. ``deadline_action="discard"`` drops it instead of keeping it in the dead set.
    """

    retry: bool | int | None = None
    deadline: dt.datetime | float | None = None
    deadline_action: str | None = None

    def using(self, *, deadline: dt.datetime | float | None = None, deadline_action: str | None = None,
              **options: Any) -> WurkTask:
        """Django's ``using()`` (``priority``, ``queue_name``, ``run_after``, ``backend``),
        plus ``deadline`` and ``deadline_action``; a bad value raises ``ValueError``
        (:class:`InvalidDeadline`) naming it, here."""
        # Task.using by name: a slotted dataclass's zero-argument super() fails before Python 3.14.
        task = Task.using(self, **options)
        changes = {name: value for name, value in (("deadline", deadline), ("deadline_action", deadline_action))
                   if value is not None}
        return dataclasses.replace(task, **changes) if changes else task


def task(function: Callable[..., Any] | None = None, *, priority: int = DEFAULT_TASK_PRIORITY,
         queue_name: str = DEFAULT_TASK_QUEUE_NAME, backend: str = DEFAULT_TASK_BACKEND_ALIAS,
         takes_context: bool = False, retry: bool | int | None = None) -> Any:
    """``@task`` that accepts ``retry=`` whatever the Django version."""

    def wrapper(func: Callable[..., Any]) -> WurkTask:
        return WurkTask(func=func, priority=priority, queue_name=queue_name, backend=backend,
                        takes_context=takes_context, retry=retry)

    return wrapper(function) if function is not None else wrapper


def _check_deadline(task: Task) -> None:
    """A task's deadline options as a push checks them (:class:`InvalidDeadline` naming them)."""
    deadline, action = getattr(task, "deadline", None), getattr(task, "deadline_action", None)
    if deadline is None and action is None:
        return
    try:
        deadlines.normalize({"deadline": deadline, "deadline_action": action})
    except ValueError as exc:
        raise InvalidDeadline(str(exc)) from None


def _valid_retry(value: Any) -> bool:
    return value is None or isinstance(value, bool) or (isinstance(value, int) and value >= 0)


def _companions(record: dict[str, Any], ttl: int) -> Companions:
    """What a task's push carries: its result record, written in the push's round trip, and
    the end workers take from next for a high-priority task (``RPUSH``, DJ-015)."""

    def commands(job: dict) -> list[tuple[Any, ...]]:
        return push_commands(job["jid"], record, ttl) if record else []

    def front(job: dict) -> bool:
        return "at" not in job and (job.get("task") or {}).get("priority", 0) > 0

    return Companions(commands=commands, front=front)


class WurkBackend(BaseTaskBackend):
    """Runs Django tasks on wurk workers; results are readable from any process."""

    task_class = WurkTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        # Django builds one per thread and per settings change: no I/O, no pools here (DJ-012).
        super().__init__(alias, params)
        self.result_ttl = self.options.get("RESULT_TTL", results.DEFAULT_TTL)
        self.retry = self.options.get("RETRY", True)
        self.database = self.options.get("DATABASE")

    @property
    def enqueue_on_commit(self) -> bool:
        """Whether a task enqueued inside ``atomic()`` waits for the commit: this alias's
        option, else ``WURK["ENQUEUE_ON_COMMIT"]`` when it is set, else True. Apps enqueue
        inside their own transactions (Wagtail's admin does); a task pushed before the
        commit runs on rows a worker cannot see yet, or that a rollback never writes."""
        value = self.options.get("ENQUEUE_ON_COMMIT")
        if value is None:
            value = context.config().enqueue_on_commit
        return True if value is None else bool(value)

    def _in_transaction(self) -> bool:
        # Asked of this thread's connection without opening it: outside atomic() a task is
        # pushed at once, and a process with no database at hand never touches one.
        return transaction.get_connection(self.database).in_atomic_block

    def validate_task(self, task: Task) -> None:
        if isinstance(task.run_after, dt.timedelta):
            # Django's own check wants a datetime; a delay is checked as the time it names.
            # (replace() validates the copy through this method again.)
            dataclasses.replace(task, run_after=_due(task.run_after))
        else:
            super().validate_task(task)
        if not _valid_retry(getattr(task, "retry", None)):
            raise InvalidTask(f"retry must be True, False or a number of attempts >= 0, not {task.retry!r}")
        _check_deadline(task)

    # -- enqueue -----------------------------------------------------------

    def _prepare(self, task: Task, args: Any, kwargs: Any) -> tuple[TaskResult, dict[str, Any], dict[str, Any]]:
        """Validate and build ``(result, job item, result record)``; no I/O."""
        if isinstance(task.run_after, dt.timedelta):  # a delay counts from the push (DJ-014)
            task = dataclasses.replace(task, run_after=_due(task.run_after))
        self.validate_task(task)
        jid = payload.new_jid()
        result = TaskResult(
            task=task, id=jid, status=TaskResultStatus.READY, enqueued_at=None, started_at=None,
            finished_at=None, last_attempted_at=None, args=args, kwargs=kwargs, backend=self.alias,
            errors=[], worker_ids=[],
        )
        meta = results.task_meta(task)
        meta["backend"] = self.alias
        meta["result_ttl"] = self.result_ttl
        retry = getattr(task, "retry", None)
        from .job import TaskJob

        item: dict[str, Any] = {
            "class": TaskJob,
            "queue": task.queue_name,
            "args": [result.args, result.kwargs],
            "jid": jid,
            "wrapped": task.module_path,
            "display_class": task.module_path,
            "retry": self.retry if retry is None else retry,
            "task": meta,
        }
        if task.run_after is not None:
            item["at"] = results.run_after_epoch(task.run_after)
        deadline = getattr(task, "deadline", None)
        if deadline is not None:  # the push stores epoch seconds and refuses a run_after past it
            item["deadline"] = deadline
            if task.deadline_action is not None:
                item["deadline_action"] = task.deadline_action
        first = {
            "state": waiting_state(task.run_after is not None),
            "class": task.module_path,
            "task": meta,
            "args": result.args,
            "kwargs": result.kwargs,
            "errors": [],
            "worker_ids": [],
            "ttl": self.result_ttl,
        }
        return result, item, first

    def _after_push(self, result: TaskResult, record: dict[str, Any]) -> None:
        object.__setattr__(result, "enqueued_at", results.to_datetime(record.get("enqueued_at")))
        task_enqueued.send(type(self), task_result=result)

    def _write(self, client: Client, planned: Planned | None, result: TaskResult, record: dict[str, Any]) -> None:
        if planned is None:
            return  # a client middleware stopped it
        record["enqueued_at"] = payload.now_ms()
        client.write(planned)
        self._after_push(result, record)

    def _defer(self, client: Client, prepared: Any, result: TaskResult, record: dict[str, Any]) -> bool:
        """Inside ``atomic()`` on this thread: the push waits for the commit (none on
        rollback) and True; else False, to push now."""
        if not self._in_transaction():
            return False
        client.check(prepared)  # the error an immediate push raises, raised now
        transaction.on_commit(lambda: self._write(client, client.finish(prepared), result, record),
                              using=self.database)
        return True

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Push the task: inside ``atomic()``, when it commits (unless ENQUEUE_ON_COMMIT is
        False); outside, now (DJ-013, DJ-023). Either way through the push door: a bad
        option or argument raises here. The result is READY at once, with its final id."""
        result, item, record = self._prepare(task, args, kwargs)
        client = Client()
        prepared = client.prepare(item, _companions(record, self.result_ttl))
        if not (self.enqueue_on_commit and self._defer(client, prepared, result, record)):
            self._write(client, client.finish(prepared), result, record)
        return result

    async def aenqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        """Native ``redis.asyncio`` push through the push door and the write path (DJ-017); the
        client middleware runs in a thread when it applies (it may do blocking I/O).

        A transaction belongs to a sync thread (async code has no ``atomic()``). With
        ENQUEUE_ON_COMMIT, when sync code awaits this call through ``async_to_sync``, the
        push waits for the commit of an ``atomic()`` open there (asked in that thread, with
        ``sync_to_async``). Otherwise, as in an async view, it goes now, natively."""
        result, item, record = self._prepare(task, args, kwargs)
        client = Client()
        prepared = client.prepare(item, _companions(record, self.result_ttl))
        if self.enqueue_on_commit and _sync_caller() and await sync_to_async(self._defer, thread_sensitive=True)(
                client, prepared, result, record):
            return result
        if client.middleware_applies(prepared):
            planned = await sync_to_async(client.finish, thread_sensitive=True)(prepared)
        else:
            planned = client.finish(prepared)
        if planned is not None:
            record["enqueued_at"] = payload.now_ms()
            await client.awrite(planned)
            self._after_push(result, record)
        return result

    # -- results -----------------------------------------------------------

    def get_result(self, result_id: str) -> TaskResult:
        """The result from Redis, from any process (DJ-018)."""
        if not results.valid_id(result_id):
            raise TaskResultDoesNotExist(result_id)
        fields = results.read(context.layout_redis(), result_id)  # on a Redis Cluster too (issue 46 item 3)
        if fields is None:
            raise TaskResultDoesNotExist(result_id)
        return results.build_result(fields, result_id)

    async def aget_result(self, result_id: str) -> TaskResult:
        if not results.valid_id(result_id):
            raise TaskResultDoesNotExist(result_id)
        try:
            client = async_redis(context.config())
        except RedisClusterError:
            # A Redis Cluster (issue 46 item 3): wurk has no redis.asyncio cluster path; one
            # HGETALL in a thread, off the event loop.
            import asyncio

            return await asyncio.to_thread(self.get_result, result_id)
        fields = await results.aread(client, result_id)
        if fields is None:
            raise TaskResultDoesNotExist(result_id)
        return results.build_result(fields, result_id)

    # -- checks --------------------------------------------------------------

    def check(self, **kwargs: Any) -> list[checks.CheckMessage]:
        """Configuration errors of this alias, reported by ``manage.py check`` (DJ-004)."""
        obj = f"TASKS[{self.alias!r}]"
        found: list[checks.CheckMessage] = []
        for name in self.options:
            if name not in OPTION_NAMES:
                found.append(checks.Error(f"unknown OPTIONS key {name!r}", hint="known: " + ", ".join(OPTION_NAMES),
                                          obj=obj, id="wurk.E030"))
        ttl = self.options.get("RESULT_TTL", results.DEFAULT_TTL)
        if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 1:
            found.append(checks.Error(f"OPTIONS['RESULT_TTL'] = {ttl!r} is not a whole number of seconds >= 1",
                                      obj=obj, id="wurk.E031"))
        if "RETRY" in self.options and (self.options["RETRY"] is None or not _valid_retry(self.options["RETRY"])):
            found.append(checks.Error(f"OPTIONS['RETRY'] = {self.options['RETRY']!r} is not True, False or "
                                      "a number of attempts >= 0", obj=obj, id="wurk.E031"))
        if "ENQUEUE_ON_COMMIT" in self.options and not isinstance(self.options["ENQUEUE_ON_COMMIT"], bool):
            found.append(checks.Error("OPTIONS['ENQUEUE_ON_COMMIT'] must be True or False", obj=obj, id="wurk.E031"))
        for queue in sorted(self.queues):
            if not isinstance(queue, str) or not QUEUE_NAME.match(queue):
                found.append(checks.Error(f"queue name {queue!r} is not usable by wurk",
                                          hint=f"a queue name must be {QUEUE_NAME_RULE}", obj=obj,
                                          id="wurk.E032"))
        return found


def _sync_caller() -> bool:
    """Whether this coroutine runs for sync code waiting in ``async_to_sync``, in a thread
    that may be inside ``atomic()`` (asgiref names that code's executor while it waits)."""
    from asgiref.sync import AsyncToSync

    executors = getattr(AsyncToSync, "executors", None)
    if executors is None:
        return True  # an asgiref that does not say: ask that thread
    return getattr(executors, "current", None) is not None


def _due(delay: dt.timedelta) -> dt.datetime:
    """``run_after=timedelta``: that long from now, as Django's own timestamps are (aware
    with ``USE_TZ``, local naive without)."""
    from django.utils import timezone

    return timezone.now() + delay
