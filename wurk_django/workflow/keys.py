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

On a Redis Cluster (issue 46 item 3) the same keys are ``{wf:<id>}`` and
``{wf:<id>}:<suffix>``, one hash slot per workflow, and the index is
``{wurk}:workflows`` (:mod:`wurk_django.redis.cluster_layout`); every function here
takes the layout of the client it is for.
"""

from __future__ import annotations

from ..redis.cluster_layout import SIDEKIQ, SidekiqLayout

#: The index of workflows, newest last (score: creation time), on one server.
WORKFLOWS = SIDEKIQ.workflows
SUFFIXES = ("state", "left", "results", "errors", "wire", "steps")


def workflow(wid: str, suffix: str | None = None, layout: SidekiqLayout = SIDEKIQ) -> str:
    return layout.workflow(wid, suffix)


def all_keys(wid: str, layout: SidekiqLayout = SIDEKIQ) -> list[str]:
    """Every key of a workflow, the hash first, in the order the scripts take them."""
    return [layout.workflow(wid), *(layout.workflow(wid, s) for s in SUFFIXES)]
