"""The ``CAPSULES`` setting: named thread pools of a worker process beside the default
one, each with its own threads and queues (CORE-100, CORE-240), and its checks.

The ``default`` capsule always exists: ``CONCURRENCY`` and ``QUEUES`` (``-c`` and
``-q``) shape it. ``WURK["CAPSULES"]`` (or ``manage.py wurk --capsule``) adds
others beside it, e.g. one thread for a queue whose jobs must never overlap::

    WURK = {"CAPSULES": {"single": {"concurrency": 1, "queues": ["single"]}}}

A queue belongs to one capsule only: two capsules fetching one queue would make
neither's limit mean anything, and the Busy page tells the capsule of a running
job by its queue. How a worker runs them: :mod:`wurk_django.server.capsules`.

Imports nothing of the worker engine: every process reads the settings.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from .validators import is_int, parse_queue

DEFAULT = "default"
#: Capsule names: they appear in thread names, log lines and ``--capsule NAME:THREADS``.
NAME = re.compile(r"\A[A-Za-z0-9_.-]+\Z")
NAME_RULE = "letters, digits, '_', '.' and '-'"
KEYS = ("concurrency", "queues")


@dataclass(frozen=True)
class Capsule:
    """One thread pool of a worker process: ``concurrency`` threads fetching ``queues``
    (``(name, weight)`` pairs, in the order and mode of ``QUEUES``)."""

    name: str
    concurrency: int
    queues: tuple[tuple[str, int], ...]

    @property
    def queue_names(self) -> list[str]:
        return list(dict.fromkeys(name for name, _ in self.queues))


def _entry_problems(name: Any, entry: Any) -> list[str]:
    where = f"capsule {name!r}"
    if not isinstance(name, str) or not NAME.fullmatch(name):
        return [f"{where}: a capsule name is a non-empty string of {NAME_RULE}"]
    if name == DEFAULT:
        return [f"{where}: the default capsule is set by CONCURRENCY and QUEUES (-c and -q), not here"]
    if not isinstance(entry, dict):
        return [f"{where}: {entry!r} is not a dict with 'concurrency' and 'queues'"]
    found: list[str] = []
    unknown = sorted(str(key) for key in entry if key not in KEYS)
    if unknown:
        found.append(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; a capsule takes "
                     f"{' and '.join(map(repr, KEYS))}")
    missing = [key for key in KEYS if key not in entry]
    if missing:
        found.append(f"{where}: {' and '.join(map(repr, missing))} missing")
    if "concurrency" in entry and not is_int(entry["concurrency"], 1):
        found.append(f"{where}: concurrency {entry['concurrency']!r} is not an integer >= 1")
    if "queues" in entry:
        queues = entry["queues"]
        if not isinstance(queues, (list, tuple)) or not queues:
            found.append(f"{where}: queues {queues!r} is not a non-empty list of queue specs")
        else:
            for spec in queues:
                try:
                    parse_queue(spec)
                except ConfigurationError as exc:
                    found.append(f"{where}: {exc}")
    return found


def problems(value: Any) -> list[str]:
    """What is wrong with a ``WURK["CAPSULES"]`` value, one message each (the settings
    check; a queue shared with ``QUEUES`` is :func:`overlap`'s to say)."""
    if not isinstance(value, dict):
        return [f"{value!r} is not a dict of name: {{'concurrency': N, 'queues': [...]}}"]
    found = [message for name, entry in value.items() for message in _entry_problems(name, entry)]
    if not found:
        shared = overlap(parse_setting(value))
        if shared:
            found.append(shared)
    return found


def parse_setting(value: Any) -> tuple[Capsule, ...]:
    """``WURK["CAPSULES"]`` -> the capsules it adds, in its order; ConfigurationError
    naming the first bad value."""
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise ConfigurationError(f"WURK['CAPSULES']: {problems(value)[0]}")
    for name, entry in value.items():
        bad = _entry_problems(name, entry)
        if bad:
            raise ConfigurationError(f"WURK['CAPSULES']: {bad[0]}")
    return tuple(Capsule(name, entry["concurrency"], tuple(parse_queue(spec) for spec in entry["queues"]))
                 for name, entry in value.items())


def overlap(capsules: Iterable[Capsule]) -> str | None:
    """The first queue that two capsules both serve, said in words; None when none is."""
    owner: dict[str, str] = {}
    for capsule in capsules:
        for name in capsule.queue_names:
            if name in owner:
                return (f"queue {name!r} is in capsules {owner[name]!r} and {capsule.name!r}; "
                        "a queue belongs to one capsule")
            owner[name] = capsule.name
    return None


def parse_cli(values: list[list[str]] | None) -> dict[str, dict[str, Any]] | None:
    """``--capsule NAME:THREADS QUEUE[,WEIGHT] ...`` (repeatable) -> the
    ``WURK["CAPSULES"]`` dict they make (``None`` when none was given).
    ConfigurationError naming the bad argument."""
    if not values:
        return None
    out: dict[str, dict[str, Any]] = {}
    for words in values:
        head, *queues = words
        name, colon, threads = head.rpartition(":")
        if not colon or not name:
            raise ConfigurationError(f"--capsule {' '.join(words)}: start with NAME:THREADS, e.g. "
                                     "--capsule single:1 single")
        if not threads.isdigit():
            raise ConfigurationError(f"--capsule {head}: THREADS {threads!r} is not a whole number")
        if not queues:
            raise ConfigurationError(f"--capsule {head}: name the capsule's queues after it, e.g. "
                                     f"--capsule {head} {name}")
        if name in out:
            raise ConfigurationError(f"--capsule {head}: capsule {name!r} is given twice")
        entry = {"concurrency": int(threads), "queues": list(queues)}
        bad = _entry_problems(name, entry)
        if bad:
            raise ConfigurationError(f"--capsule {' '.join(words)}: {bad[0]}")
        out[name] = entry
    return out


def describe(capsules: list[Capsule]) -> str:
    """``default (5 threads): a, b; single (1 thread): single``, for log lines."""
    return "; ".join(f"{c.name} ({c.concurrency} thread{'s' if c.concurrency != 1 else ''}): "
                     f"{', '.join(c.queue_names)}" for c in capsules)


def settings_overlap(raw: dict[str, Any]) -> str | None:
    """A queue that ``raw``'s ``CAPSULES`` shares with its ``QUEUES``, said in words."""
    from .table import current

    queues = raw.get("QUEUES") or current().defaults["QUEUES"]
    default = Capsule(DEFAULT, 1, tuple(parse_queue(spec) for spec in queues))
    return overlap([default, *parse_setting(raw["CAPSULES"])])

