"""Where a workflow lives in Redis: one hash per concern, all named after the workflow id.

| Key | Type | Holds |
|---|---|---|
| ``wf-<id>`` | hash | ``state``, ``description``, ``created_at``, ``finished_at``, ``failed_at``, ``total``, ``succeeded``, ``failed``, ``order``, ``callback_queue``, ``keep`` |
| ``wf-<id>-state`` | hash | step -> ``waiting`` / ``enqueued`` / ``succeeded`` / ``failed`` / ``cancelled`` |
| ``wf-<id>-left`` | hash | step -> dependencies not yet succeeded |
| ``wf-<id>-results`` | hash | step -> its return value, as JSON |
| ``wf-<id>-errors`` | hash | step -> its last error |
| ``wf-<id>-wire`` | hash | step -> what the scripts need to push it |
| ``wf-<id>-steps`` | hash | step -> its definition, as JSON, for readers |
| ``workflows`` | sorted set | workflow ids by creation time |
"""

from __future__ import annotations

#: The index of workflows, newest last (score: creation time).
WORKFLOWS = "workflows"
SUFFIXES = ("state", "left", "results", "errors", "wire", "steps")


def workflow(wid: str, suffix: str | None = None) -> str:
    return f"wf-{wid}" if suffix is None else f"wf-{wid}-{suffix}"


def all_keys(wid: str) -> list[str]:
    """Every key of a workflow, the hash first, in the order the scripts take them."""
    return [workflow(wid), *(workflow(wid, s) for s in SUFFIXES)]
