"""The queue limits setting: ``WURK["QUEUE_LIMITS"]``, read as ``config.queue_limits``."""

from __future__ import annotations

from typing import Any

from ..conf.setting import WORKER, Setting
from ..conf.validators import QUEUE_NAME_RULE, ConfigurationError, is_queue_name


def problems(value: Any) -> list[str]:
    """What is wrong with a ``QUEUE_LIMITS`` value, one message per bad entry, each
    naming it (the system check and the worker's boot check)."""
    if value is None:
        return []
    if not isinstance(value, dict):
        return [f"{value!r} is not a dict of queue name: the most jobs of it running at once"]
    found = []
    for name, limit in value.items():
        if not is_queue_name(name):
            found.append(f"{name!r} is not a queue name ({QUEUE_NAME_RULE})")
        elif isinstance(limit, bool) or not isinstance(limit, int):
            found.append(f"the limit of queue {name!r} is {limit!r}, not an integer")
        elif limit < 1:
            found.append(f"the limit of queue {name!r} is {limit!r}; it must be at least 1 "
                         "(to stop a queue, pause it)")
    return found


def parse(value: Any) -> dict[str, int]:
    """The limits as ``{queue: most}``; ConfigurationError naming the first bad entry."""
    bad = problems(value)
    if bad:
        raise ConfigurationError(f"WURK['QUEUE_LIMITS']: {bad[0]}")
    return dict(value or {})


def basic_fetch_refusal(limits: dict[str, int] | None, names: list[str]) -> str | None:
    """Why a ``BasicFetch`` worker serving ``names`` cannot start under ``limits``, or None.

    Kept a refusal rather than supported: ``BRPOP`` takes a job with no way to take a slot
    in the same step, and a job a hard kill lost (BasicFetch keeps no copy) would leave no
    trace telling the reaper whose slot to free. Said at boot, before Redis is touched."""
    capped = sorted(name for name in dict.fromkeys(names) if limits and name in limits)
    if not capped:
        return None
    return (f"WURK['QUEUE_LIMITS'] caps {', '.join(capped)}, which needs the default reliable fetch; "
            "FETCH_CLASS is BasicFetch, whose BRPOP cannot take a slot with the job (and a job a hard kill "
            "lost would hold its slot for good). Leave FETCH_CLASS unset, or serve the capped queues from "
            "workers that do (docs/queues.md)")


ROWS = (
    Setting("QUEUE_LIMITS", None,
            lambda v: not problems(v), "a dict of queue name: an integer >= 1",
            "The most jobs of a queue running at once across every worker process, e.g. `{\"reports\": 2}`. "
            "A full queue's jobs stay queued (they are not fetched) while the worker's other queues run "
            "as usual; a process that dies frees its slots within the reaper's rules. Needs the default "
            "reliable fetch. See docs/queues.md.", WORKER,
            detail="wurk_django.queue_limits.settings.problems", parse=parse, type=dict),
)
