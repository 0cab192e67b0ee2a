"""The workflow Lua scripts and the KEYS/ARGV each takes (one place spells the layout out).

Each function names the keys through the layout of the client it is given
(:func:`~wurk_django.redis.cluster_layout.layout_of`): Sidekiq-style ``wf-<id>`` keys on
one server, ``{wf:<id>}`` keys on a Redis Cluster, where every key of these scripts
is the workflow's own, one hash slot (issue 46 item 3; the pushes of its steps, in
other slots, are :mod:`.cluster`'s).
"""

from __future__ import annotations

from typing import Any

from .. import keys as core_keys
from ..client.operations import wake_args
from ..redis.cluster_layout import SIDEKIQ, SidekiqLayout, layout_of
from ..redis.scripts import lua
from . import keys

ADVANCE = lua("workflow/lua/advance")
FAIL = lua("workflow/lua/fail")
RETRY = lua("workflow/lua/retry")
CANCEL = lua("workflow/lua/cancel")
STORE_RESULT = lua("workflow/lua/store_result")
NOTE_ERROR = lua("workflow/lua/note_error")


def advance_args(wid: str, step: str, now: Any, keep: int, candidates: list[tuple[str, str]],
                 layout: SidekiqLayout = SIDEKIQ) -> tuple[list, list]:
    """KEYS and ARGV of ``advance.lua``; ``candidates`` are ``(step, queue)`` pairs. On a
    cluster only the workflow's own keys: the script hands the jobs back instead of pushing."""
    script_keys: list[Any] = keys.all_keys(wid, layout)
    if not layout.cluster:
        script_keys.append(core_keys.QUEUES)
        for _name, queue in candidates:
            script_keys += [core_keys.queue(queue), core_keys.wake(queue)]
    return script_keys, [step, now, keep, *wake_args(), *(name for name, _queue in candidates)]


def advance(client: Any, wid: str, step: str, now: Any, keep: int, candidates: list[tuple[str, str]]) -> list:
    """``advance.lua``: ``[steps pushed (or made ready), finished now]``; on a cluster followed
    by ``name, queue, job`` for each step the caller must push (:mod:`.cluster`)."""
    script_keys, argv = advance_args(wid, step, now, keep, candidates, layout_of(client))
    reply = ADVANCE(client, script_keys, argv)
    return [int(reply[0]), int(reply[1]), *reply[2:]]


def _three(client: Any, wid: str, last: str) -> list[str]:
    layout = layout_of(client)
    return [layout.workflow(wid), layout.workflow(wid, "state"), layout.workflow(wid, last)]


def fail(client: Any, wid: str, step: str, error: str, now: float) -> int:
    return int(FAIL(client, _three(client, wid, "errors"), [step, error, repr(now)]))


def retry(client: Any, wid: str, step: str) -> int:
    layout = layout_of(client)
    return int(RETRY(client, [layout.workflow(wid), layout.workflow(wid, "state")], [step]))


def cancel(client: Any, wid: str, now: float, keep: int) -> int:
    return int(CANCEL(client, keys.all_keys(wid, layout_of(client)), [repr(now), keep]))


def store_result(client: Any, wid: str, step: str, encoded: bytes) -> int:
    return int(STORE_RESULT(client, _three(client, wid, "results"), [step, encoded]))


def note_error(client: Any, wid: str, step: str, error: str) -> int:
    return int(NOTE_ERROR(client, _three(client, wid, "errors"), [step, error]))
