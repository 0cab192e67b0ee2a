"""Swarm: one supervisor forking and minding many worker processes (ENT-701..713, RUN-401..411).

Python threads share one core, so a swarm is how wurk_django uses every
core: the supervisor sets Django up once, then ``os.fork()``s one child per
slot; each child runs a full worker (a Launcher) with its own Redis pools and
its own identity ``<host>:<pid>:<nonce>`` (the nonce is inherited, so the
supervisor can compute every child's identity).

One concept per module:

* :mod:`.topology` — how many children and what each runs (CPU count, cgroup quota, ``SWARM``);
* :mod:`.slots` — what the supervisor knows about each slot and child, and the crash backoff;
* :mod:`.supervisor` — the state machine: fork, reap, respawn, signals, drain;
* :mod:`.restart` — rolling restarts (USR1, memory recycling), one slot at a time;
* :mod:`.monitors` — memory and liveness checks and the supervisor's Redis probe;
* :mod:`.cohosted` — a swarm started inside a web process.
"""

from .cohosted import cohosted_refusal, start_cohosted
from .monitors import memory_limit_kb, rss_kb
from .restart import Restart
from .slots import Child, SlotState, SwarmError, backoff_delay, child_identity
from .supervisor import Swarm, run_swarm
from .topology import Assignment, assignments, cpu_count, parse_count

__all__ = [
    "Assignment", "Child", "Restart", "SlotState", "Swarm", "SwarmError", "assignments", "backoff_delay",
    "child_identity", "cohosted_refusal", "cpu_count", "memory_limit_kb", "parse_count", "rss_kb", "run_swarm",
    "start_cohosted",
]
