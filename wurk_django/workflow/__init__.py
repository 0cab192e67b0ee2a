"""Workflows on batches: chain, group, chord and graphs of named steps (issue 27).

::

    from wurk_django.workflow import chain, chord, group, Flow

    workflow = chain(Fetch.s(url), Parse.s(), Store.s()).run()
    chord([Resize.s(i) for i in ids], Report.s()).run()

See docs/workflows.md.
"""

from .canvas import Canvas, Chain, Chord, Group, chain, chord, group
from .errors import CannotRetry, InvalidWorkflow, NoSuchWorkflow, StepResultError
from .flow import Flow
from .signature import Signature
from .status import Workflow, WorkflowSet

__all__ = ["Canvas", "CannotRetry", "Chain", "Chord", "Flow", "Group", "InvalidWorkflow", "NoSuchWorkflow",
           "Signature", "StepResultError", "Workflow", "WorkflowSet", "chain", "chord", "group"]
