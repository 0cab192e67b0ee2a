"""Checking periodic registrations: ``WURK["PERIODIC"]`` entries and ``register()`` calls.

Everything here is pure (no Redis), so settings checks, ``manage.py check``
and ``manage.py wurk_check_periodic`` can all use it.
"""

from __future__ import annotations

from typing import Any

from .. import canonical
from ..conf import QUEUE_NAME, QUEUE_NAME_RULE
from . import zones
from .loops import Loop
from .schedule import parse

#: Payload keys a loop may not set: each fire gets its own.
RESERVED_OPTIONS = ("class", "jid", "at", "created_at", "enqueued_at", "wait", "wait_until", "bid")
ENTRY_KEYS = ("cron", "job")


def build_loop(cron: Any, job: Any, tz: Any = None, options: dict[str, Any] | None = None) -> Loop:
    """Validate one registration and return its :class:`Loop` (not stored).

    Raises ``ValueError`` naming the bad value.
    """
    options = dict(options or {})
    if not isinstance(cron, str):
        raise ValueError(f"periodic schedule must be a cron string, not {cron!r}")
    parse(cron)
    klass = job_name(job)
    for key in options:
        if not isinstance(key, str):
            raise ValueError(f"periodic option names must be strings, not {key!r}")
        if key in RESERVED_OPTIONS:
            raise ValueError(f"periodic option {key!r} cannot be set on a loop (every fire sets its own)")
    if "args" in options and not isinstance(options["args"], (list, tuple)):
        raise ValueError(f"periodic 'args' must be a list, not {options['args']!r}")
    if "args" in options:
        options["args"] = list(options["args"])
    queue = options.get("queue")
    if queue is not None and not (isinstance(queue, str) and QUEUE_NAME.match(queue)):
        raise ValueError(f"periodic 'queue' {queue!r} is not a queue name ({QUEUE_NAME_RULE})")
    retry = options.get("retry")
    if retry is not None and not (isinstance(retry, bool) or (isinstance(retry, int) and retry >= 0)):
        raise ValueError(f"periodic 'retry' must be True, False or a count >= 0, not {retry!r}")
    if "paused" in options and not isinstance(options["paused"], bool):
        raise ValueError(f"periodic 'paused' must be True or False, not {options['paused']!r}")
    if "label" in options and not isinstance(options["label"], str):
        raise ValueError(f"periodic 'label' must be a string, not {options['label']!r}")
    try:
        canonical.dumps(options, allow_nan=False)  # stored as JSON that Ruby's JSON.parse must read back
    except (TypeError, ValueError) as exc:
        raise ValueError(f"periodic options for {klass} must be JSON (strings, numbers, lists, dicts): {exc}") from None
    name = zones.zone_name(tz)
    return Loop.build(cron, klass, options, name)


#: What a Ruby wurk leader pushes from a loop's stored ``options`` besides the class:
#: ``args``, ``queue`` (else "default") and ``retry`` (else true). It reads nothing else.
RUBY_PUSH_KEYS = ("args", "queue", "retry")


def ruby_push_defaults(klass: str) -> dict[str, Any]:
    """The job class's own ``queue`` and ``retry``, where they differ from what a Ruby
    leader would push without them ("default", true): stored with the loop's options,
    so a Ruby leader's fire goes to the class's queue with its retries, as ours does.
    Empty when the class does not resolve here (a Ruby class, or apps not loaded yet)."""
    from ..registry import registered

    job_class = registered().get(klass)
    if job_class is None:
        return {}
    options = job_class.get_options()
    found: dict[str, Any] = {}
    if isinstance(options.get("queue"), str) and options["queue"] != "default":
        found["queue"] = options["queue"]
    if "retry" in options and options["retry"] is not True:
        found["retry"] = options["retry"]
    return found


def job_name(job: Any) -> str:
    """The class string a loop pushes: a dotted path / job name, or a Job class."""
    from ..job import Job

    if isinstance(job, type) and issubclass(job, Job):
        return job.job_name
    inner = getattr(job, "job_class", None)
    if isinstance(inner, type) and issubclass(inner, Job):
        return inner.job_name
    if not isinstance(job, str) or not job.strip():
        raise ValueError(f"periodic job must be a job class or its name, not {job!r}")
    if "|" in job or job != job.strip():
        raise ValueError(f"periodic job name {job!r} must not contain '|' or surrounding spaces")
    return job


def resolve_job(name: str) -> None:
    """Raise ``ValueError`` unless a job class answers to ``name`` (imports its module if allowed)."""
    from ..errors import ConfigurationError, UnknownJobClass
    from ..registry import registered, resolve

    try:
        resolve(name)
    except UnknownJobClass as exc:
        raise ValueError(f"periodic job {name!r}: {exc}") from None
    except ConfigurationError:
        # Other WURK settings are broken (reported on their own); judge by what is imported.
        if name not in registered():
            raise ValueError(f"periodic job {name!r} is not registered (modules were not imported: "
                             "WURK has other errors)") from None


def entry_loop(entry: Any) -> Loop:
    """The loop a ``WURK["PERIODIC"]`` entry registers; ``ValueError`` when it is malformed."""
    if not isinstance(entry, dict):
        raise ValueError(f"each WURK['PERIODIC'] entry must be a dict like "
                         f"{{'cron': '0 4 * * *', 'job': 'app.jobs.Nightly'}}, not {entry!r}")
    missing = [k for k in ENTRY_KEYS if k not in entry]
    if missing:
        raise ValueError(f"WURK['PERIODIC'] entry {entry!r} lacks {' and '.join(repr(k) for k in missing)}")
    options = {k: v for k, v in entry.items() if k not in ("cron", "job", "tz")}
    return build_loop(entry["cron"], entry["job"], entry.get("tz"), options)


def entry_problems(entries: Any, *, resolve_classes: bool = False) -> list[str]:
    """What is wrong with a ``WURK["PERIODIC"]`` value, one message per bad entry."""
    if not isinstance(entries, (list, tuple)):
        return [f"WURK['PERIODIC'] must be a list of dicts, not {type(entries).__name__}"]
    found = []
    for index, entry in enumerate(entries):
        try:
            loop = entry_loop(entry)
            if resolve_classes:
                resolve_job(loop.klass)
        except ValueError as exc:
            found.append(f"entry {index}: {exc}")
    return found


def zone_warnings(entries: Any) -> list[str]:
    """Entries whose ``tz`` is not a known zone (they would run on UTC)."""
    found = []
    for index, entry in enumerate(entries if isinstance(entries, (list, tuple)) else []):
        tz = entry.get("tz") if isinstance(entry, dict) else None
        if isinstance(tz, str) and tz and not zones.is_known(tz):
            found.append(f"entry {index}: unknown time zone {tz!r}; this loop would run on UTC")
    return found
