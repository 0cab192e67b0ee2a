"""Swarm topology: how many children, and what each runs (ENT-702, RUN-401).

The CPU count honours the affinity mask and a cgroup CPU quota (v1 or v2), so a
container limited to 2 CPUs forks 2 children on a 64-core host.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass

from ...conf import Config, parse_queue

logger = logging.getLogger("wurk_django.swarm")


@dataclass(frozen=True)
class Assignment:
    """What one forked child runs: its slot number, queues and concurrency."""

    index: int
    queues: tuple[str, ...]
    concurrency: int


def cpu_count() -> tuple[int, str]:
    """CPUs this process may use, honouring a cgroup quota, and where the number came from (RUN-401)."""
    try:
        cpus = len(os.sched_getaffinity(0))
        origin = "affinity"
    except (AttributeError, OSError):
        cpus, origin = os.cpu_count() or 1, "cpu_count"
    quota = _cgroup_quota()
    if quota is not None and quota < cpus:
        return max(1, quota), "cgroup"
    return max(1, cpus), origin


def _cgroup_quota() -> int | None:
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:  # v2: "max 100000" or "200000 100000"
            quota, period = f.read().split()[:2]
        if quota != "max":
            return math.ceil(int(quota) / int(period))
    except (OSError, ValueError):
        pass
    try:
        with open("/sys/fs/cgroup/cpu/cpu.cfs_quota_us") as f:
            quota_us = int(f.read())
        with open("/sys/fs/cgroup/cpu/cpu.cfs_period_us") as f:
            period_us = int(f.read())
        if quota_us > 0 and period_us > 0:
            return math.ceil(quota_us / period_us)
    except (OSError, ValueError):
        pass
    return None


def parse_count(value: str | int | None) -> int:
    """How many children: ``"auto"``/``None`` (env ``WURK_COUNT``/``SIDEKIQ_COUNT``, else CPUs),
    a whole number, or a decimal multiplying the CPU count (ENT-702). Never below 1."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "auto")):
        value = os.environ.get("WURK_COUNT") or os.environ.get("SIDEKIQ_COUNT") or ""
        if not value.strip():
            return cpu_count()[0]
    if isinstance(value, int):
        return max(1, value)
    text = value.strip()
    try:
        return max(1, int(text))
    except ValueError:
        pass
    try:
        factor = float(text)
    except ValueError:
        logger.warning("swarm count %r is not a number; using the CPU count", value)
        return cpu_count()[0]
    if not math.isfinite(factor) or factor <= 0:
        return cpu_count()[0]
    return max(1, math.ceil(factor * cpu_count()[0]))


def assignments(config: Config, processes: int | None = None) -> list[Assignment]:
    """One Assignment per child: ``WURK["SWARM"]`` flattened in order, else ``processes``
    copies of the config's own queues and concurrency (RUN-401)."""
    topology = config.swarm
    if topology:
        out: list[Assignment] = []
        for slot in topology:
            queues = tuple(slot.get("queues") or config.raw["QUEUES"])
            for spec in queues:
                parse_queue(spec)  # a bad spec fails here, in the supervisor, not in every child
            concurrency = int(slot.get("concurrency") or config.concurrency)
            for _ in range(int(slot.get("count", 1))):
                out.append(Assignment(len(out), queues, concurrency))
        return out
    count = parse_count(processes)
    queues = tuple(f"{name},{weight}" if weight else name for name, weight in config.queues)
    return [Assignment(i, queues, config.concurrency) for i in range(count)]

