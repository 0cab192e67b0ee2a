"""Capsules at run time: each capsule of a worker process (the ``CAPSULES`` setting,
:mod:`wurk_django.conf.capsules`) runs its own manager, processor threads
(``<capsule>/processor``), fetcher and middleware chain, on a copy of the
process's config with the capsule's threads and queues (CORE-100).

The capsules' private lists never share a name: each capsule numbers its fetch
slots in steps of the number of capsules, from its own place (see
:class:`Place`), so the reaper judges each capsule's lists and "running"
markers by themselves after a crash (PRO-110).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from ..conf.capsules import DEFAULT, Capsule, overlap
from ..errors import ConfigurationError


@dataclass(frozen=True)
class Place:
    """Where a capsule's config copy sits in its process: the capsule, its index among
    the process's capsules (``default`` is 0), how many there are, and the threads of
    all of them (the Redis pools are the process's, sized for every thread)."""

    capsule: Capsule
    index: int
    count: int
    process_concurrency: int


def plan(config: Any) -> list[Capsule]:
    """Every capsule ``config`` runs: ``default`` (``CONCURRENCY``, ``QUEUES``) first,
    then ``WURK["CAPSULES"]`` in order. ConfigurationError when a queue is in two."""
    default = Capsule(DEFAULT, config.concurrency, tuple(config.queues))
    capsules = [default, *config.capsules]
    shared = overlap(capsules)
    if shared:
        raise ConfigurationError(shared)
    return capsules


def capsule_config(config: Any, capsules: list[Capsule], index: int) -> Any:
    """The config capsule ``index`` of ``capsules`` runs with: ``config`` with that
    capsule's threads and queues, and its :class:`Place` in ``config.capsule``."""
    capsule = capsules[index]
    derived = copy.copy(config)
    if getattr(config, "_root", None) is None:
        # A cache of its own: a shard config derived from this copy keeps its capsule,
        # and the settings' config never hands out a capsule's copy.
        derived._shards = {}
    derived.concurrency = capsule.concurrency
    derived.queues = list(capsule.queues)
    derived.capsule = Place(capsule, index, len(capsules), sum(c.concurrency for c in capsules))
    return derived
