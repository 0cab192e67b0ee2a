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


ROWS = (
    Setting("QUEUE_LIMITS", None,
            lambda v: not problems(v), "a dict of queue name: an integer >= 1",
            "The most jobs of a queue running at once across every worker process, e.g. `{\"reports\": 2}`. "
            "A full queue's jobs stay queued (they are not fetched) while the worker's other queues run "
            "as usual; a process that dies frees its slots within the reaper's rules. Needs the default "
            "reliable fetch. See docs/queues.md.", WORKER,
            detail="wurk_django.queue_limits.settings.problems", parse=parse, type=dict),
)
