"""Celery-style building blocks, compiled to a :class:`~wurk_django.workflow.flow.Flow`.

* ``chain(a, b, c)``: ``b`` starts once ``a`` succeeded and gets its result in
  front of its arguments (unless ``b`` is immutable, ``.si()``); then ``c``.
* ``group(a, b, c)``: all three at once; what follows a group gets the list of
  their results.
* ``chord(group(...), callback)``: ``callback`` gets the list of the group's
  results once all of them succeeded.

They nest: ``chain(a, group(b, c), d)``, ``group(chain(a, b), c)``,
``chord([a, b], chain(c, d))``. ``.run()`` writes the workflow and starts it.
"""

from __future__ import annotations

import re
from typing import Any

from .errors import InvalidWorkflow
from .flow import Flow
from .signature import Signature

_UNSAFE = re.compile(r"[^A-Za-z0-9_.:@/-]")


class Canvas:
    """A chain, group or chord; :meth:`run` (or ``apply_async``) starts it as a workflow."""

    def flow(self, description: str = "", *, callback_queue: str = "default") -> Flow:
        """The :class:`Flow` this builds (steps named ``<n>-<job class>``)."""
        flow = Flow(description, callback_queue=callback_queue)
        self._add(flow, [], False)
        return flow

    def run(self, description: str = "", *, callback_queue: str = "default") -> Any:
        """Write the workflow to Redis and start it; returns its :class:`~wurk_django.workflow.Workflow`."""
        return self.flow(description, callback_queue=callback_queue).run()

    apply_async = run
    delay = run

    def _add(self, flow: Flow, after: list[str], after_group: bool) -> tuple[list[str], bool]:
        raise NotImplementedError

    def __or__(self, other: Any) -> Chain:
        return chain(self, other)


def _element(value: Any) -> Signature | Canvas:
    if isinstance(value, (Signature, Canvas)):
        return value
    if isinstance(value, (list, tuple)):
        return Group([_element(v) for v in value])
    raise InvalidWorkflow(f"a workflow element is a signature (Job.s(...)), a chain, a group or a chord, "
                          f"not {value!r}")


def _add(element: Signature | Canvas, flow: Flow, after: list[str], after_group: bool) -> tuple[list[str], bool]:
    """Add ``element`` after the steps ``after``; its last steps, and whether it is a group."""
    if isinstance(element, Canvas):
        return element._add(flow, after, after_group)
    short = _UNSAFE.sub("_", element.target.rsplit(".", 1)[-1].rsplit("::", 1)[-1])[:60] or "step"
    name = flow.step(f"{len(flow.steps)}-{short}", element, after, results="list" if after_group else None)
    return [name], False


class Chain(Canvas):
    def __init__(self, elements: list[Signature | Canvas]) -> None:
        if not elements:
            raise InvalidWorkflow("a chain needs at least one element")
        self.elements = elements

    def _add(self, flow: Flow, after: list[str], after_group: bool) -> tuple[list[str], bool]:
        last, is_group = after, after_group
        for element in self.elements:
            last, is_group = _add(element, flow, last, is_group)
        return last, is_group


class Group(Canvas):
    def __init__(self, elements: list[Signature | Canvas]) -> None:
        if not elements:
            raise InvalidWorkflow("a group needs at least one element")
        self.elements = elements

    def _add(self, flow: Flow, after: list[str], after_group: bool) -> tuple[list[str], bool]:
        last: list[str] = []
        for element in self.elements:
            last += _add(element, flow, after, after_group)[0]
        return last, True


class Chord(Canvas):
    def __init__(self, header: Group, body: Signature | Canvas) -> None:
        self.header, self.body = header, body

    def _add(self, flow: Flow, after: list[str], after_group: bool) -> tuple[list[str], bool]:
        last, _ = self.header._add(flow, after, after_group)
        return _add(self.body, flow, last, True)


def chain(*elements: Any) -> Chain:
    """Run the elements one after the other, each given the previous one's result."""
    return Chain([_element(e) for e in elements])


def group(*elements: Any) -> Group:
    """Run the elements in parallel; a step after the group gets the list of their results."""
    if len(elements) == 1 and isinstance(elements[0], (list, tuple)):
        elements = tuple(elements[0])
    return Group([_element(e) for e in elements])


def chord(header: Any, body: Any) -> Chord:
    """Run ``header`` (a group, or a list of signatures) in parallel, then ``body`` with the list of their results."""
    head = _element(header)
    if not isinstance(head, Group):
        head = Group([head])
    return Chord(head, _element(body))
