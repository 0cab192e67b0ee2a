"""``AsyncResult``: the handle ``delay()``/``apply_async()`` return, a view of the task's
result record (``status:<jid>``, kept by :mod:`wurk_django.results`)."""

from __future__ import annotations

import builtins
import datetime as dt
import importlib
import json
import sys
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from .. import context, registry
from ..conf import Config
from ..results import record, store
from ..results.states import celery_name
from . import states
from .exceptions import IncompleteStream, TaskError, TaskRevokedError, TimeoutError


class AsyncResult:
    """The result of one task call, by its id (the job's jid).

    Any process can build one from an id: ``AsyncResult(jid)``; an id no record can have
    (see :data:`wurk_django.results.store.ID`) is refused with ``ValueError``. A task
    that was pushed with ``ignore_result=True``, or whose record expired, reads
    ``PENDING`` for ever, as in Celery; :meth:`get` then waits until its ``timeout``.
    """

    def __init__(self, id: str, task_name: str | None = None, *, config: Config | None = None,  # noqa: A002
                 parent: Any = None) -> None:
        self.id = store.check_id(id)
        self.task_name = task_name
        self._config = config  # the Redis (shard) the job was pushed to; the settings' when None
        #: The result before this one in a chain (a chord's body: the header's GroupResult),
        #: known to the result a canvas returned; ``None`` for one built from an id.
        self.parent = parent
        #: The results after this one in a chain, or of its ``link`` callbacks (a canvas's).
        self.children: list[Any] | None = None
        #: The workflow running this call when a canvas pushed it: ``get()`` then hears of
        #: a failure of a step before it (Celery marks the rest of a failed chain failed).
        self.workflow: Any = None

    @property
    def task_id(self) -> str:
        return self.id

    def __repr__(self) -> str:
        return f"<AsyncResult: {self.id}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AsyncResult) and other.id == self.id

    def __hash__(self) -> int:
        return hash(self.id)

    # -- reading -----------------------------------------------------------------

    def _redis(self) -> Any:
        # The result record is one key: on a Redis Cluster the RedisCluster reads it (issue 46 item 3).
        return context.layout_redis(config=self._config)

    def _fields(self) -> dict[str, Any] | None:
        here = store.local(self.id)
        if here is not None:
            return here
        return store.read(self._redis(), self.id)

    @property
    def name(self) -> str | None:
        """The task's name, from its record (or the call that made this handle)."""
        return (self._fields() or {}).get("class") or self.task_name

    @property
    def args(self) -> list | None:
        """The call's positional arguments, when its record keeps them."""
        return (self._fields() or {}).get("args")

    @property
    def kwargs(self) -> dict | None:
        """The call's keyword arguments, when its record keeps them."""
        return (self._fields() or {}).get("kwargs")

    @property
    def state(self) -> str:
        """``PENDING``, ``STARTED``, ``RETRY``, ``SUCCESS``, ``FAILURE`` (or a custom state
        the task set with ``update_state`` while it runs)."""
        return _state(self._fields())

    status = state

    def ready(self) -> bool:
        """True once the task succeeded or failed for good."""
        return self.state in states.READY_STATES

    def successful(self) -> bool:
        return self.state == states.SUCCESS

    def failed(self) -> bool:
        return self.state == states.FAILURE

    @property
    def result(self) -> Any:
        """The return value once ``SUCCESS``, the exception once ``FAILURE``, the ``meta`` of
        a custom state, else ``None``."""
        return _value(self._fields())

    info = result

    @property
    def traceback(self) -> str | None:
        """The traceback of the last failed attempt (text), if any."""
        fields = self._fields() or {}
        errors = fields.get("errors") or []
        return errors[-1].get("traceback") if errors else None

    @property
    def date_done(self) -> dt.datetime | None:
        fields = self._fields() or {}
        finished = fields.get("finished_at")
        return dt.datetime.fromtimestamp(finished / 1000, tz=dt.UTC) if finished else None

    @property
    def retries(self) -> int:
        """Failed attempts so far."""
        return len((self._fields() or {}).get("errors") or [])

    def get(self, timeout: float | None = None, propagate: bool = True, interval: float = 0.5,
            disable_sync_subtasks: bool = True) -> Any:
        """Wait until the task is ready and return its value.

        A failed task raises its exception here (``propagate=False`` returns it); past
        ``timeout`` seconds, :class:`~wurk_django.celery.TimeoutError`. ``interval`` is
        the longest pause between two reads of the record (reads start faster). Inside
        a running job this refuses (``RuntimeError``), as Celery does: a worker thread
        waiting for another job can wait for ever; pass ``disable_sync_subtasks=False``
        to wait anyway.
        """
        if disable_sync_subtasks and context.running() is not None and context.running().unit is not None:
            raise RuntimeError("never wait for a task's result inside a job: the job waiting holds a worker "
                               "thread the awaited one may need (use a workflow chain instead)")
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = min(0.02, interval)
        while True:
            fields = self._fields()
            if _state(fields) in states.READY_STATES:
                break
            failed_before = self._failed_before()
            if failed_before is not None:
                if propagate:
                    raise _value(failed_before._fields())
                return _value(failed_before._fields())
            if deadline is not None and time.monotonic() >= deadline:
                raise TimeoutError(f"task {self.id} was not ready after {timeout} s (state {_state(fields)})")
            wait = pause if deadline is None else max(0.0, min(pause, deadline - time.monotonic()))
            time.sleep(wait)
            pause = min(pause * 2, interval)
        value = _value(fields)
        if _state(fields) in (states.FAILURE, states.REVOKED) and propagate:
            raise value
        return value

    wait = get

    def _failed_before(self) -> AsyncResult | None:
        """The failed call before this one in its workflow, once the workflow failed: its
        steps after the failure never run, so this result would read PENDING for ever."""
        if self.workflow is None or self.workflow.state != "failed":
            return None
        todo, seen = [self.parent], set()
        while todo:
            item = todo.pop(0)
            if item is None or id(item) in seen:
                continue
            seen.add(id(item))
            if isinstance(item, GroupResult):
                todo.extend(item.results)
                todo.append(item.parent)
            elif item.state in (states.FAILURE, states.REVOKED):
                return item
            else:
                todo.append(item.parent)
        return None

    def iterdeps(self, intermediate: bool = False) -> Iterator[tuple[Any, Any]]:
        """``(parent, result)`` for this result and, once each is ready, its children,
        breadth first (Celery's order). A result not ready yet whose children are asked for
        raises ``IncompleteStream``, unless ``intermediate``. The children are those the
        canvas call that returned this result knew (``.children``); a result read back by
        its id alone has none."""
        todo: deque[tuple[Any, Any]] = deque([(None, self)])
        while todo:
            parent, node = todo.popleft()
            yield parent, node
            if node.ready():
                todo.extend((node, child) for child in (node.children or ()))
            elif not intermediate:
                raise IncompleteStream(f"{node!r} is not ready: its children are not known yet")

    def collect(self, intermediate: bool = False, **kwargs: Any) -> Iterator[tuple[Any, Any]]:
        """``(result, value)`` for this result and its children (:meth:`iterdeps`'s order),
        each value from ``get(**kwargs)``, as Celery's ``collect()``."""
        for _parent, node in self.iterdeps(intermediate=intermediate):
            yield node, node.get(**kwargs)

    def then(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("AsyncResult.then() (promises) is not supported: chain the next task (a | b)")

    def revoke(self, terminate: bool = False, *, by: str | None = None) -> str:
        """Celery's ``revoke``: the task never runs if it still waits (queue, schedule, retry
        set); with ``terminate=True`` a running one is stopped too (soft, then hard). It
        goes to the dead set naming ``by``, and its result then reads ``REVOKED``. Returns
        where it was found (:func:`wurk_django.api.revoke.revoke`)."""
        from ..api.revoke import revoke  # the data API: only when asked

        # The revoked job dies naming ``by``; the results feature's death handler marks its record.
        return revoke(self.id, by=by, terminate=terminate, redis=self._redis())

    def forget(self) -> None:
        """Delete the record now (it would expire after the task's ``result_expires``)."""
        record.forget(self._redis(), self.id)


class GroupResult:
    """The results of a group's calls, in the group's order (Celery's ``GroupResult``).

    ``get()``/``join()`` wait for every one and return the list of values (the first
    failure, in order, is raised); ``completed_count()`` counts the successful ones.
    """

    def __init__(self, id: str | None = None, results: list[Any] | None = None,  # noqa: A002
                 parent: Any = None) -> None:
        from .. import payload

        self.id = id or payload.new_jid()
        self.results: list[Any] = list(results or [])
        self.parent = parent
        self.workflow: Any = None

    @property
    def children(self) -> list[Any]:
        return self.results

    def __repr__(self) -> str:
        return f"<GroupResult: {self.id} [{', '.join(r.id for r in self.results)}]>"

    def __len__(self) -> int:
        return len(self.results)

    def __iter__(self) -> Any:
        return iter(self.results)

    def __getitem__(self, index: int) -> Any:
        return self.results[index]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, GroupResult) and other.id == self.id and other.results == self.results

    def __hash__(self) -> int:
        return hash(self.id)

    def completed_count(self) -> int:
        """How many of the calls succeeded."""
        return sum(1 for r in self.results if r.successful())

    def ready(self) -> bool:
        return all(r.ready() for r in self.results)

    def waiting(self) -> bool:
        return not self.ready()

    def successful(self) -> bool:
        return all(r.successful() for r in self.results)

    def failed(self) -> bool:
        return any(r.failed() for r in self.results)

    def join(self, timeout: float | None = None, propagate: bool = True, interval: float = 0.5,
             disable_sync_subtasks: bool = True) -> list[Any]:
        """Wait for each call in order; the list of their values. ``timeout`` is for all of them."""
        deadline = None if timeout is None else time.monotonic() + timeout
        values = []
        for result in self.results:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            values.append(result.get(timeout=left, propagate=propagate, interval=interval,
                                     disable_sync_subtasks=disable_sync_subtasks))
        return values

    get = join

    def forget(self) -> None:
        for result in self.results:
            result.forget()

    def revoke(self, terminate: bool = False) -> None:
        for result in self.results:
            result.revoke(terminate=terminate)

    def save(self) -> None:
        raise TypeError("GroupResult.save() is not supported: keep the ids (group_result.id, [r.id for r in "
                        "group_result.results]) and rebuild it with GroupResult(id, [AsyncResult(i) for i in ids])")

    @classmethod
    def restore(cls, id: str) -> GroupResult:  # noqa: A002
        raise TypeError("GroupResult.restore() is not supported: no group is stored; rebuild it with "
                        "GroupResult(id, [AsyncResult(i) for i in ids]) from the ids you kept")


def _state(fields: dict[str, Any] | None) -> str:
    if not fields:
        return states.PENDING
    state = celery_name(fields.get("state"))
    custom = fields.get("custom_state")
    if custom and state not in states.READY_STATES:
        return custom
    if state == states.STARTED and "progress" in fields:
        return PROGRESS  # reported with self.progress() / wurk_django.status.progress()
    return state


#: The custom state Celery code uses for progress; a record with progress (and no
#: ``update_state`` of its own) reads it while running, ``info`` being Celery's usual meta.
PROGRESS = "PROGRESS"


def _value(fields: dict[str, Any] | None) -> Any:
    state = _state(fields)
    if fields is None:
        return None
    if state == states.SUCCESS:
        return fields.get("return_value")
    if state == states.FAILURE:
        if "exception" in fields:  # run in this process: the very exception
            return fields["exception"]
        errors = fields.get("errors") or []
        return rebuild(errors[-1]) if errors else TaskError("unknown", "the task failed without a stored error")
    if state == states.REVOKED:
        return TaskRevokedError(f"task {fields.get('class')} will not run: it was revoked or expired")
    if state not in states.ALL_STATES and fields.get("meta"):
        return json.loads(fields["meta"])
    if state == PROGRESS and "progress" in fields:
        return {"current": fields["progress"], "total": 100, "message": fields.get("message") or ""}
    return None


def rebuild(error: dict[str, Any]) -> BaseException:
    """The stored error as an exception of its own class when this process can build
    one without importing a module a payload may not import; else a :class:`TaskError`."""
    path = str(error.get("exception_class_path") or "")
    message = str(error.get("message") or "")
    trace = str(error.get("traceback") or "")
    module_name, _, qualname = path.rpartition(".")
    kind: Any = None
    if module_name == "builtins":
        kind = getattr(builtins, qualname, None)
    elif module_name:
        module = sys.modules.get(module_name)
        if module is None and registry.may_import(module_name):
            try:
                module = importlib.import_module(module_name)
            except Exception:  # noqa: BLE001 - a module that fails to import: report the failure as TaskError
                module = None
        kind = module
        for part in qualname.split(".") if module is not None else ():
            kind = getattr(kind, part, None)
    if isinstance(kind, type) and issubclass(kind, Exception):
        args = error.get("args")
        try:
            return kind(*args) if isinstance(args, list) else kind(message)
        except Exception:  # noqa: BLE001 - a constructor that wants other arguments
            pass
    return TaskError(path or "unknown", message, trace)
