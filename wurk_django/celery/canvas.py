"""Celery's canvas (``celery.canvas``): ``signature``, ``chain``, ``group``, ``chord``,
``chunks``, ``xmap``/``xstarmap``, run by wurk's one workflow engine.

::

    from wurk_django.celery import chain, chord, group

    (add.s(2, 2) | add.s(4) | add.s(8))().get()              # 16
    group(add.s(i, i) for i in range(10))().get()             # [0, 2, ..., 18]
    chord((add.s(i, i) for i in range(10)), xsum.s())().get()  # 90

A lone signature's ``delay()``/``apply_async()`` is the task's own push. A chain, group
or chord is compiled to a :class:`~wurk_django.workflow.Flow` (through
:mod:`wurk_django.workflow.canvas`) whose steps are the tasks: each step's job id is
chosen here, so the result objects (:class:`~.result.AsyncResult`,
:class:`~.result.GroupResult`, with Celery's ``parent``/``children``) are known before
anything is written, and each step keeps its own result record (``status:<id>``,
written by :mod:`wurk_django.results`) like any task call.

What a workflow cannot do is refused with the alternative named (see :data:`REFUSED_IN_CANVAS`).
"""

from __future__ import annotations

import inspect
import itertools
from collections.abc import Iterable
from typing import Any

from .. import payload, registry
from . import calling
from .result import AsyncResult, GroupResult
from .task import Task, shared_task

#: Options of a task call that mean nothing for a step a workflow pushes when its turn comes.
REFUSED_IN_CANVAS = {
    "countdown": "a workflow pushes each step as soon as the steps before it succeeded; delay the whole canvas "
                 "by pushing a task that starts it (apply_async(countdown=...) on a lone signature)",
    "eta": "a workflow pushes each step as soon as the steps before it succeeded; delay the whole canvas "
           "by pushing a task that starts it (apply_async(eta=...) on a lone signature)",
    "expires": "a step of a workflow has no expiry of its own (the workflow lives WURK['WORKFLOW_KEEP'] seconds); "
               "use expires on a lone signature",
    "deadline": "a step of a workflow has no deadline of its own (a workflow pushes it when the steps before it "
                "succeeded); use deadline on a lone signature",
    "deadline_action": "a step of a workflow has no deadline of its own; use deadline on a lone signature",
    "link": "a link inside a chain, group or chord: write the callback as the next element of a chain",
    "soft_time_limit": "per-call time limits do not reach workflow steps: give the task soft_time_limit= in "
                       "@shared_task",
    "time_limit": "per-call time limits do not reach workflow steps: give the task time_limit= in @shared_task",
    "retry": "retrying the push applies to a lone apply_async; a workflow is written in one Redis transaction",
    "retry_policy": "retrying the push applies to a lone apply_async; a workflow is written in one Redis transaction",
}


def _wf() -> Any:
    """The workflow engine's canvas, imported when a canvas runs (a push loads no engine module)."""
    from ..workflow import canvas

    return canvas


def _task_of(name: str) -> Task:
    job_class = registry.resolve(name)
    if not hasattr(job_class, "fn"):
        raise TypeError(f"{name!r} is a wurk job, not a Celery-style task: use {name}.s() from wurk_django.workflow")
    return Task(job_class.fn, job_class)


class Signature:
    """One task call written down (Celery's ``signature``/``subtask``): ``task`` (its
    name), ``args``, ``kwargs``, ``options`` and ``immutable``.

    ``sig.delay(*args)``/``sig.apply_async(args, kwargs, **options)`` push it, the given
    args in front of its own (Celery's partial arguments); ``sig(*args)`` runs it here
    and now; ``a | b`` is a chain; ``~sig`` pushes it and waits for its value.
    """

    subtask_type: str | None = None

    def __init__(self, task: Any = None, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                 options: dict[str, Any] | None = None, immutable: bool = False, subtask_type: str | None = None,
                 **more_options: Any) -> None:
        if isinstance(task, Signature) and args is None and kwargs is None:
            other = task
            task, args, kwargs, options, immutable = (other._task or other.task, other.args, other.kwargs,
                                                      other.options, other.immutable)
        if isinstance(task, dict):  # Celery's dict form: signature({"task": ..., "args": ...})
            data = task
            task, args, kwargs = data.get("task"), data.get("args"), data.get("kwargs")
            options, immutable = data.get("options"), bool(data.get("immutable"))
        self._task: Task | None = task if isinstance(task, Task) else None
        if self._task is None and not (isinstance(task, str) and task):
            raise TypeError(f"a signature names a task (a @shared_task or its name), not {task!r}")
        self.task: str = self._task.name if self._task is not None else task
        self.args: tuple = tuple(args or ())
        self.kwargs: dict[str, Any] = dict(kwargs or {})
        self.options: dict[str, Any] = {**(options or {}), **more_options}
        self.immutable = bool(immutable)

    # -- Celery's signature API ------------------------------------------------------

    @property
    def type(self) -> Task:
        """The task object this signature calls."""
        if self._task is None:
            self._task = _task_of(self.task)
        return self._task

    @property
    def id(self) -> str | None:
        return self.options.get("task_id")

    def _merge(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
               options: dict[str, Any] | None = None) -> tuple[tuple, dict[str, Any], dict[str, Any]]:
        """Celery's rule: partial ``args`` go in front of the signature's own (an immutable
        signature keeps its own only), ``kwargs`` and ``options`` are merged over them."""
        args = tuple(args or ())
        if self.immutable:
            return self.args, dict(self.kwargs), {**self.options, **(options or {})}
        return args + self.args, {**self.kwargs, **(kwargs or {})}, {**self.options, **(options or {})}

    def clone(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
              **options: Any) -> Signature:
        """A copy, with partial ``args``/``kwargs``/``options`` merged as :meth:`apply_async` does."""
        args, kwargs, options = self._merge(args, kwargs, options)
        return Signature(self._task or self.task, args, kwargs, options, self.immutable)

    partial = clone

    def set(self, immutable: bool | None = None, **options: Any) -> Signature:
        """Add call options to this signature (Celery changes it in place and returns it)."""
        if immutable is not None:
            self.immutable = bool(immutable)
        self.options.update(options)
        return self

    def set_immutable(self, immutable: bool) -> None:
        self.immutable = bool(immutable)

    def link(self, callback: Signature) -> Signature:
        """Run ``callback`` with this call's result in front of its args once it succeeded."""
        self.options.setdefault("link", []).append(callback)
        return callback

    def link_error(self, errback: Signature) -> Signature:
        """Call ``errback`` when this call fails for good (see :mod:`.errbacks`)."""
        self.options.setdefault("link_error", []).append(errback)
        return errback

    def on_error(self, errback: Signature) -> Signature:
        """:meth:`link_error`, returning this signature (to chain calls), as Celery's does."""
        self.link_error(errback)
        return self

    def freeze(self, _id: str | None = None) -> AsyncResult:
        """Fix this call's id now; the :class:`AsyncResult` it will have."""
        self.options["task_id"] = _id or self.options.get("task_id") or payload.new_jid()
        return AsyncResult(self.options["task_id"], self.task)

    def delay(self, *args: Any, **kwargs: Any) -> AsyncResult | None:
        """Push the call, ``args`` in front of its own: ``apply_async(args, kwargs)``."""
        return self.apply_async(args, kwargs)

    def apply_async(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    **options: Any) -> AsyncResult | None:
        """Push the call with Celery's options (those of ``Task.apply_async``)."""
        args, kwargs, options = self._merge(args, kwargs, options)
        job_class = self.type.job_class
        links = _signatures(options.pop("link", None), "link")
        if links:
            return _apply_linked(Signature(self.type, args, kwargs, options, self.immutable), links)
        return calling.apply_async(job_class, args, kwargs, **_with_errbacks(options))

    def apply(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
              **options: Any) -> AsyncResult:
        """Run the call in this process now (Celery's ``apply``)."""
        args, kwargs, options = self._merge(args, kwargs, options)
        for name in ("link", "link_error"):
            options.pop(name, None)
        return self.type.apply(args, kwargs, **options)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task's function here and now, ``args`` in front of the signature's own."""
        args, kwargs, _ = self._merge(args, kwargs)
        return self.type(*args, **kwargs)

    def __or__(self, other: Any) -> chain:
        return chain(self, other)

    def __invert__(self) -> Any:
        """``~sig``: push it and wait for its value."""
        return self.apply_async().get()

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Signature) and type(other) is type(self)
                and (other.task, other.args, other.kwargs, other.immutable) ==
                (self.task, self.args, self.kwargs, self.immutable))

    def __hash__(self) -> int:
        return hash((self.task, self.args))

    def __repr__(self) -> str:
        parts = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.task}.{'si' if self.immutable else 's'}({', '.join(parts)})"

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (a payload carries errbacks so)."""
        return {"task": self.task, "args": list(self.args), "kwargs": self.kwargs, "immutable": self.immutable,
                "options": {k: v for k, v in self.options.items() if k not in ("link", "link_error")}}

    # -- compiling to a workflow ------------------------------------------------------

    def _step(self, args: tuple, kwargs: dict[str, Any], defaults: dict[str, Any],
              parent: Any) -> tuple[Any, Any]:
        """This call as a workflow element, and its result (``parent`` its parent result)."""
        args, kwargs, options = self._merge(args, kwargs, None)
        options = {**defaults, **options}
        _refuse(options, f"the step {self!r}")
        job_class = self.type.job_class
        jid = store_id(options.get("task_id"))
        step_options: dict[str, Any] = {"jid": jid}
        ignore = options.get("ignore_result")
        if not (job_class.ignore_result if ignore is None else ignore):
            step_options["result_ttl"] = int(job_class.result_expires)
        if options.get("queue"):
            step_options["queue"] = options["queue"]
        if options.get("shadow"):
            step_options["display_class"] = options["shadow"]
        errbacks = _signatures(options.get("link_error"), "link_error")
        if errbacks:
            step_options["link_error"] = [e.to_dict() for e in errbacks]
        result = AsyncResult(jid, self.task, parent=parent)
        from ..workflow.signature import Signature as StepSignature

        return StepSignature(self.task, args, kwargs, step_options, immutable=self.immutable), result


def store_id(task_id: str | None) -> str:
    from ..results import store

    return payload.new_jid() if task_id is None else store.check_id(task_id)


def _refuse(options: dict[str, Any], where: str) -> None:
    for name, why in REFUSED_IN_CANVAS.items():
        if options.get(name) is not None and not (name in ("retry",) and options[name] is False):
            raise TypeError(f"{where}: option {name!r} is not supported inside a chain, group or chord: {why}")
    unknown = set(options) - calling.KNOWN - calling.IGNORED - calling.CANVAS - set(REFUSED_IN_CANVAS)
    if unknown:
        raise TypeError(f"{where}: unknown options {sorted(unknown)}; known: {sorted(calling.KNOWN)}")


def _signatures(value: Any, what: str) -> list[Signature]:
    if value is None:
        return []
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for item in items:
        if not isinstance(item, Signature) or isinstance(item, _Canvas):
            raise TypeError(f"{what} takes task signatures (task.s(...)), not {item!r}")
    return items


def _with_errbacks(options: dict[str, Any]) -> dict[str, Any]:
    errbacks = _signatures(options.pop("link_error", None), "link_error")
    if errbacks:
        options["link_error"] = [e.to_dict() for e in errbacks]
    return options


def _apply_linked(sig: Signature, links: list[Signature]) -> AsyncResult:
    """``apply_async(link=...)``: the call and its callbacks as one workflow; the call's result."""
    root_options = dict(sig.options)
    for name in ("countdown", "eta", "expires", "deadline"):
        if root_options.get(name) is not None:
            raise TypeError(f"apply_async(link=..., {name}=...) is not supported: a linked call runs as a "
                            f"workflow, which pushes at once; push a task that makes the linked call later")
    root = Signature(sig.type, sig.args, sig.kwargs, root_options, sig.immutable)
    step, result = root._step((), {}, {}, None)
    children = [link._step((), {}, {}, result) for link in links]
    result.children = [r for _, r in children]
    body = children[0][0] if len(children) == 1 else _wf().Group([s for s, _ in children])
    workflow = _wf().Chain([step, body]).run(f"{sig.task} with its callbacks")
    _attach(result, workflow)
    return result


def _attach(result: Any, workflow: Any) -> None:
    """Let every result of one workflow know it, so ``get()`` hears of a failure before it."""
    seen: set[int] = set()
    todo = [result]
    while todo:
        item = todo.pop()
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        item.workflow = workflow
        todo.append(item.parent)
        todo.extend(item.children or [])
        if isinstance(item, GroupResult):
            todo.extend(item.results)


# -- chains, groups, chords --------------------------------------------------------------


def _element(value: Any) -> Signature:
    if isinstance(value, Signature):
        return value
    if isinstance(value, dict):
        return Signature(value)
    if isinstance(value, (list, tuple)):
        return group(value)
    raise TypeError(f"a canvas element is a signature (task.s(...)), a chain, a group or a chord, not {value!r}")


class _Canvas(Signature):
    """What a chain, group and chord share: calling one (``()``, ``delay``,
    ``apply_async``) runs it as a workflow and returns its result."""

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = dict(options or {})
        self.args, self.kwargs, self.immutable = (), {}, False
        self._task, self.task = None, f"celery.{self.subtask_type}"

    @property
    def type(self) -> Task:
        raise TypeError(f"a {self.subtask_type} is not one task")

    def _merge(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
               options: dict[str, Any] | None = None) -> tuple[tuple, dict[str, Any], dict[str, Any]]:
        return tuple(args or ()), dict(kwargs or {}), {**self.options, **(options or {})}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Celery's ``canvas()``: push it (as ``apply_async(args, kwargs)``) and return its result."""
        return self.apply_async(args, kwargs)

    def apply_async(self, args: Iterable[Any] | None = None, kwargs: dict[str, Any] | None = None,
                    **options: Any) -> Any:
        """Write the workflow and start it; ``args`` go in front of the first task(s)' own.
        Options given here (``queue``...) apply to every step that has none of its own."""
        args, kwargs, options = self._merge(args, kwargs, options)
        options = {k: v for k, v in options.items() if k not in calling.IGNORED}
        _refuse(options, f"{self.subtask_type}.apply_async()")
        if options.get("task_id") is not None or options.get("link_error") is not None:
            given = "task_id" if options.get("task_id") is not None else "link_error"
            raise TypeError(f"{self.subtask_type}.apply_async({given}=...) is not supported: set it on the "
                            f"task's own signature (sig.set({given}=...)) inside the canvas")
        if self._empty():
            return GroupResult(payload.new_jid(), [])
        element, result = self._step(args, kwargs, options, None)
        workflow = element.run(f"celery {self.subtask_type} {self!r}"[:200])
        _attach(result, workflow)
        return result

    def _empty(self) -> bool:
        return False

    def apply(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        raise TypeError(f"{self.subtask_type}.apply() (run a canvas here) is not supported: a workflow needs Redis "
                        "and a worker; call each task's apply() in order, or run a worker in the test")

    def __invert__(self) -> Any:
        return self.apply_async().get()

    def freeze(self, _id: str | None = None) -> Any:
        raise TypeError(f"{self.subtask_type}.freeze() is not supported: the result ids are chosen when it is "
                        "applied; read them from the returned result (.id, .parent, .results)")

    def link(self, callback: Signature) -> Signature:
        raise TypeError(f"{self.subtask_type}.link() is not supported: chain the callback after it "
                        f"({self.subtask_type} | callback)")

    def link_error(self, errback: Signature) -> Signature:
        raise TypeError(f"{self.subtask_type}.link_error() is not supported: set it on each task's signature "
                        "(sig.on_error(errback))")

    on_error = link_error


class chain(_Canvas):  # noqa: N801 - Celery's name
    """``chain(a, b, c)`` (or ``a | b | c``): one after the other, each given the
    previous one's result in front of its args. Its result is the last task's, whose
    ``parent`` is the one before."""

    subtask_type = "chain"

    def __init__(self, *tasks: Any, **options: Any) -> None:
        super().__init__(options)
        if len(tasks) == 1 and not isinstance(tasks[0], Signature) and isinstance(tasks[0], Iterable):
            tasks = tuple(tasks[0])
        flat: list[Signature] = []
        for item in (_element(t) for t in tasks):
            flat.extend(item.tasks if type(item) is chain else [item])
        self.tasks = tuple(flat)

    def __or__(self, other: Any) -> chain:
        return chain(*self.tasks, other)

    def _step(self, args: tuple, kwargs: dict[str, Any], defaults: dict[str, Any], parent: Any) -> tuple[Any, Any]:
        if not self.tasks:
            raise TypeError("an empty chain has nothing to run")
        elements, result = [], parent
        for n, task in enumerate(self.tasks):
            element, next_result = task._step(args if n == 0 else (), kwargs if n == 0 else {}, defaults, result)
            if isinstance(result, AsyncResult) and result is not parent:
                result.children = [*(result.children or []), next_result]
            elements.append(element)
            result = next_result
        return _wf().Chain(elements), result

    def __repr__(self) -> str:
        return " | ".join(repr(t) for t in self.tasks)


class group(_Canvas):  # noqa: N801 - Celery's name
    """``group(a, b, c)`` or ``group(<iterable>)``: all at once. Its result is a
    :class:`~.result.GroupResult`; a task after it gets the list of their results."""

    subtask_type = "group"

    def __init__(self, *tasks: Any, **options: Any) -> None:
        super().__init__(options)
        if len(tasks) == 1 and not isinstance(tasks[0], Signature) and isinstance(tasks[0], Iterable):
            tasks = tuple(tasks[0])  # a list, a tuple or a generator
        self.tasks = tuple(_element(t) for t in tasks)

    def _empty(self) -> bool:
        return not self.tasks

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Any:
        return iter(self.tasks)

    def _step(self, args: tuple, kwargs: dict[str, Any], defaults: dict[str, Any], parent: Any) -> tuple[Any, Any]:
        if not self.tasks:
            raise TypeError("an empty group inside a canvas has nothing to run")
        pairs = [task._step(args, kwargs, defaults, parent) for task in self.tasks]
        result = GroupResult(payload.new_jid(), [r for _, r in pairs], parent=parent)
        return _wf().Group([e for e, _ in pairs]), result

    def __repr__(self) -> str:
        return f"group([{', '.join(repr(t) for t in self.tasks)}])"


class chord(_Canvas):  # noqa: N801 - Celery's name
    """``chord(header, body)``: the header's tasks at once, then ``body`` with the list
    of their results. ``chord(header)(body)`` and ``chord(header, body)()`` both run
    it; the result is the body's, whose ``parent`` is the header's :class:`GroupResult`."""

    subtask_type = "chord"

    def __init__(self, header: Any, body: Any = None, **options: Any) -> None:
        super().__init__(options)
        self.tasks = group(header) if not isinstance(header, group) else header
        self.body = None if body is None else _element(body)

    @property
    def header(self) -> group:
        return self.tasks

    def __call__(self, body: Any = None, *args: Any, **kwargs: Any) -> Any:
        """``chord(header)(body)``: run it with this body (or the one it was given)."""
        if body is not None and not isinstance(body, Signature):
            args, body = (body, *args), None  # chord(header, body)(partial args)
        target = self if body is None else chord(self.tasks, body, **self.options)
        return target.apply_async(args, kwargs)

    def _step(self, args: tuple, kwargs: dict[str, Any], defaults: dict[str, Any], parent: Any) -> tuple[Any, Any]:
        if self.body is None:
            raise TypeError("a chord needs a body: chord(header, body)() or chord(header)(body)")
        head, head_result = self.tasks._step(args, kwargs, defaults, parent)
        body, result = self.body._step((), {}, defaults, head_result)
        return _wf().Chord(head, body), result

    def __repr__(self) -> str:
        return f"chord({self.tasks!r}, {self.body!r})"


# -- map, starmap, chunks ---------------------------------------------------------------


def _call_each(task_name: str, items: list, star: bool) -> list:
    task = _task_of(task_name)
    return [task(*item) if star else task(item) for item in items]


@shared_task(name="celery.map")
def xmap_task(task: str, it: list) -> list:
    """Celery's ``celery.map``: the task called here on each item, the list of values."""
    return _call_each(task, it, star=False)


@shared_task(name="celery.starmap")
def xstarmap_task(task: str, it: list) -> list:
    """Celery's ``celery.starmap``: the task called here with each item as its args."""
    return _call_each(task, it, star=True)


class xmap(Signature):  # noqa: N801 - Celery's name
    """``task.map(items)``: one task call that runs ``task(item)`` for each item in one
    worker, its value the list of theirs."""

    subtask_type = "xmap"
    builtin = xmap_task

    def __init__(self, task: Any, it: Iterable[Any], **options: Any) -> None:
        task = task if isinstance(task, Task) else _task_of(task.task if isinstance(task, Signature) else task)
        super().__init__(type(self).builtin, (task.name, [list(i) if isinstance(i, (tuple, range)) else i
                                                          for i in it]), {}, options, immutable=True)


class xstarmap(xmap):  # noqa: N801 - Celery's name
    """``task.starmap(items)``: ``task(*item)`` for each item, in one worker."""

    subtask_type = "xstarmap"
    builtin = xstarmap_task


class chunks(_Canvas):  # noqa: N801 - Celery's name
    """``task.chunks(items, n)``: the items in parts of ``n``, each part one
    :class:`xstarmap` call, all at once (a group): its value is the list of the parts'
    lists. ``.group()`` is that group."""

    subtask_type = "chunks"

    def __init__(self, task: Any, it: Iterable[Any], n: int, **options: Any) -> None:
        super().__init__(options)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"chunks(task, it, n): n is a number of items >= 1, not {n!r}")
        self.task_sig = task if isinstance(task, Signature) else Signature(task)
        self.it, self.n = list(it), n

    def group(self) -> group:
        parts = iter(self.it)
        pieces = []
        while True:
            part = list(itertools.islice(parts, self.n))
            if not part:
                break
            pieces.append(xstarmap(self.task_sig.task, part, **self.task_sig.options))
        return group(pieces, **self.options)

    def _empty(self) -> bool:
        return not self.it

    def _step(self, args: tuple, kwargs: dict[str, Any], defaults: dict[str, Any], parent: Any) -> tuple[Any, Any]:
        return self.group()._step(args, kwargs, defaults, parent)


def signature(varies: Any, *args: Any, **kwargs: Any) -> Signature:
    """Celery's ``signature(task_or_name, args=(), kwargs={}, **options)``; a signature given is returned."""
    if isinstance(varies, Signature):
        return varies.clone() if not isinstance(varies, _Canvas) else varies
    return Signature(varies, *args, **kwargs)


subtask = signature


def maybe_signature(d: Any) -> Signature | None:
    return None if d is None else signature(d)


def arity_takes_request(fn: Any) -> bool:
    """Whether an errback takes Celery 5's ``(request, exc, traceback)`` (more than one
    positional argument) rather than the old ``(task_id)``."""
    try:
        params = [p for p in inspect.signature(fn).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)]
    except (TypeError, ValueError):
        return False
    return len(params) > 1 or any(p.kind is p.VAR_POSITIONAL for p in params)


__all__ = ["Signature", "chain", "chord", "chunks", "group", "maybe_signature", "signature", "subtask", "xmap",
           "xstarmap"]
