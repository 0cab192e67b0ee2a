"""Redis's eviction policy and its ``evicted_keys`` count (issue 43 item 3, CORE-002).

With any ``maxmemory-policy`` but ``noeviction``, a Redis at its ``maxmemory`` deletes
keys to make room, and a deleted queue, schedule or retry set takes its jobs with it:
every push reported success, and nothing else says they are gone. So a worker refuses
such a server unless ``WURK["ALLOW_EVICTION"]`` is True (:func:`refusal`), ``check
--deploy`` reports ``wurk.E012``, the dashboard shows a banner, and the worker's
heartbeat logs ``evicted_keys`` growing (:class:`EvictionWatch`).

The policy is read from ``INFO memory`` (``maxmemory_policy``), which managed services
that disable ``CONFIG`` still answer, then from ``CONFIG GET maxmemory-policy``. When
neither says, the caller warns and goes on: a server that hides its policy is not
refused for it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import redis

from ..text import to_text

logger = logging.getLogger("wurk_django.worker")

NOEVICTION = "noeviction"
#: The least time between two "Redis evicted keys" lines while evictions go on.
LOG_EVERY = 60.0


def _known(value: Any) -> str | None:
    """A reply field as text; None for a missing or empty one."""
    return to_text(value) or None


def policy_from_info(memory: dict[str, Any]) -> str | None:
    """``maxmemory_policy`` of an ``INFO memory`` reply, or None when it has none."""
    return _known(memory.get("maxmemory_policy"))


def policy_from_config(client: redis.Redis) -> str | None:
    """``CONFIG GET maxmemory-policy``, or None where ``CONFIG`` is refused or renamed away."""
    try:
        reply = client.config_get("maxmemory-policy")
    except redis.ResponseError:
        return None
    if isinstance(reply, dict):
        return _known(reply.get("maxmemory-policy") or reply.get(b"maxmemory-policy"))
    return None


def policy(client: redis.Redis) -> str | None:
    """The server's ``maxmemory-policy``, or None when neither ``INFO memory`` nor
    ``CONFIG GET`` says. A connection error is raised, as from any command."""
    try:
        found = policy_from_info(client.info("memory"))
    except redis.ResponseError:
        found = None
    return found or policy_from_config(client)


def evicting(name: str | None) -> bool:
    """True for a known policy that may delete keys (any but ``noeviction``)."""
    return name is not None and name != NOEVICTION


def refusal(name: str, url: str) -> str:
    """Why a worker will not start on a Redis whose policy is ``name``, and the two ways out."""
    return (f"Redis at {url} has maxmemory-policy {name}: at its maxmemory it deletes keys, and a deleted queue, "
            f"schedule or retry set loses its jobs without a trace. Set maxmemory-policy {NOEVICTION} on that "
            "Redis, or set WURK['ALLOW_EVICTION'] = True to run on it anyway (docs/redis.md, Eviction policies).")


def unknown_policy(url: str) -> str:
    """The warning for a server that says nothing of its policy."""
    return (f"cannot read maxmemory-policy of Redis at {url} (INFO memory has no maxmemory_policy and CONFIG GET "
            f"is refused): starting, but check that it is {NOEVICTION}, or queues may be evicted")


def state(client: redis.Redis) -> tuple[str | None, int | None]:
    """(policy, evicted_keys) in one round trip (``INFO memory`` and ``INFO stats``); the
    policy falls back to ``CONFIG GET`` when ``INFO`` lacks it. None where a figure is missing."""
    pipe = client.pipeline(transaction=False)
    pipe.info("memory")
    pipe.info("stats")
    memory, stats = pipe.execute(raise_on_error=False)
    found = policy_from_info(memory) if isinstance(memory, dict) else None
    if found is None:
        found = policy_from_config(client)
    return found, evicted_from_info(stats) if isinstance(stats, dict) else None


def evicted_from_info(stats: dict[str, Any]) -> int | None:
    """``evicted_keys`` of an ``INFO stats`` reply, or None when it has none."""
    try:
        return int(stats["evicted_keys"])
    except (KeyError, TypeError, ValueError):
        return None


class EvictionWatch:
    """What the heartbeat reads each beat: the policy and ``evicted_keys``.

    The first reading is the baseline (one WARNING if Redis evicted keys before this
    process started). Growth after it is logged (ERROR, or WARNING when
    ``ALLOW_EVICTION`` says evictions are expected): one line per growth, at most one
    per :data:`LOG_EVERY` seconds while evictions go on, each naming how many keys
    went since the last line. A policy that turns evicting while the worker runs (a
    ``CONFIG SET``) is logged once per change. ``evicted`` holds the last count, for
    the statsd gauge."""

    def __init__(self, url: str, allowed: bool, clock: Callable[[], float] = time.monotonic) -> None:
        self.url = url
        self.allowed = allowed
        self.clock = clock
        self.evicted: int | None = None  # the last count read
        self.policy: str | None = None
        self._logged: int | None = None  # the count the last line (or the baseline) stated
        self._logged_at = float("-inf")

    def check(self, client: redis.Redis) -> None:
        """One reading (one round trip); a Redis error is raised to the caller."""
        self.observe(*state(client))

    def observe(self, name: str | None, evicted: int | None) -> None:
        if name != self.policy:
            if evicting(name) and self.policy is not None and not self.allowed:
                logger.error("Redis at %s now has maxmemory-policy %s (was %s): it may evict queues and lose "
                             "their jobs; set it back to %s", self.url, name, self.policy, NOEVICTION)
            self.policy = name
        if evicted is None:
            return
        self.evicted = evicted
        if self._logged is None or evicted < self._logged:  # the baseline, or a restarted server
            if self._logged is None and evicted > 0:
                logger.warning("Redis at %s has evicted %d keys since it started (INFO stats evicted_keys, "
                               "maxmemory-policy %s)", self.url, evicted, name or "unknown")
            self._logged = evicted
            return
        now = self.clock()
        if evicted > self._logged and now - self._logged_at >= LOG_EVERY:
            level = logging.WARNING if self.allowed else logging.ERROR
            logger.log(level, "Redis at %s evicted %d keys (evicted_keys %d, maxmemory-policy %s): an evicted "
                       "queue, schedule or retry set has lost its jobs; raise maxmemory or set maxmemory-policy %s",
                       self.url, evicted - self._logged, evicted, name or "unknown", NOEVICTION)
            self._logged, self._logged_at = evicted, now
