"""Workflow settings: ``WURK["WORKFLOW_RESULT_MAX_BYTES"]`` and ``WURK["WORKFLOW_KEEP"]``,
read as ``config.workflow_result_max_bytes`` and ``config.workflow_keep``."""

from __future__ import annotations

from ..conf.setting import FEATURES, Setting
from ..conf.validators import is_int

ROWS = (
    Setting("WORKFLOW_RESULT_MAX_BYTES", 1024 * 1024,
            lambda v: is_int(v, 1), "an integer >= 1",
            "Largest return value (as JSON bytes) a workflow step may store for the steps after it; a larger one"
            " fails the step's run with an error naming both sizes; see docs/workflows.md.", FEATURES,
            type=int),
    Setting("WORKFLOW_KEEP", 7 * 24 * 3600,
            lambda v: is_int(v, 1), "seconds >= 1",
            "Seconds a workflow (its steps, states, results and errors) stays in Redis after it succeeded or was"
            " cancelled; see docs/workflows.md.", FEATURES,
            type=int),
)
