"""The workflow Lua scripts and the KEYS/ARGV each takes (one place spells the layout out)."""

from __future__ import annotations

from typing import Any

from .. import keys as core_keys
from ..client.operations import wake_args
from ..redis.scripts import lua
from . import keys

ADVANCE = lua("workflow/lua/advance")
FAIL = lua("workflow/lua/fail")
RETRY = lua("workflow/lua/retry")
CANCEL = lua("workflow/lua/cancel")
STORE_RESULT = lua("workflow/lua/store_result")


def advance_args(wid: str, step: str, now: Any, keep: int, candidates: list[tuple[str, str]]) -> tuple[list, list]:
    """KEYS and ARGV of ``advance.lua``; ``candidates`` are ``(step, queue)`` pairs."""
    script_keys: list[Any] = [*keys.all_keys(wid), core_keys.QUEUES]
    for _name, queue in candidates:
        script_keys += [core_keys.queue(queue), core_keys.wake(queue)]
    return script_keys, [step, now, keep, *wake_args(), *(name for name, _queue in candidates)]


def advance(client: Any, wid: str, step: str, now: Any, keep: int, candidates: list[tuple[str, str]]) -> list[int]:
    script_keys, argv = advance_args(wid, step, now, keep, candidates)
    return [int(x) for x in ADVANCE(client, script_keys, argv)]


def fail(client: Any, wid: str, step: str, error: str, now: float) -> int:
    return int(FAIL(client, [keys.workflow(wid), keys.workflow(wid, "state"), keys.workflow(wid, "errors")],
                    [step, error, repr(now)]))


def retry(client: Any, wid: str, step: str) -> int:
    return int(RETRY(client, [keys.workflow(wid), keys.workflow(wid, "state")], [step]))


def cancel(client: Any, wid: str, now: float, keep: int) -> int:
    return int(CANCEL(client, keys.all_keys(wid), [repr(now), keep]))


def store_result(client: Any, wid: str, step: str, encoded: bytes) -> int:
    return int(STORE_RESULT(client, [keys.workflow(wid), keys.workflow(wid, "state"), keys.workflow(wid, "results")],
                            [step, encoded]))


NOTE_ERROR = lua("workflow/lua/note_error")


def note_error(client: Any, wid: str, step: str, error: str) -> int:
    return int(NOTE_ERROR(client, [keys.workflow(wid), keys.workflow(wid, "state"), keys.workflow(wid, "errors")],
                          [step, error]))
