"""Whether a pid another process recorded can be judged from here (issue 43 item 7).

A private list names its owner by host name and pid. A host name alone does not
say that the owner's pid is one this process can look up: two containers with
one host name (``--network host``, a pod restarted under its name) each have a
pid namespace of their own, and a machine that rebooted starts its pids again.
So each process records its *pid scope* in its heartbeat: the kernel's boot id
(``/proc/sys/kernel/random/boot_id``, new at every boot) and the inode of its pid
namespace (``/proc/self/ns/pid``). Two processes with the same scope see the same
pids, so one can tell by ``kill(pid, 0)`` that the other is gone.

A pid can be reused. Each process also records its start time (field 22 of
``/proc/<pid>/stat``, clock ticks since boot): a pid that exists but started at
another time is another process, and the recorded one is gone.

Where ``/proc`` does not tell (not Linux, or hidden), :func:`scope` is None and
nothing is recorded; readers then keep the slower heartbeat rules.
"""

from __future__ import annotations

import functools
import os


def _read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read().strip() or None
    except OSError:
        return None


@functools.cache
def scope() -> str | None:
    """``<boot id>/<pid namespace inode>`` of this process, or None where /proc does not say.
    A fork keeps both, so the value is computed once."""
    boot = _read("/proc/sys/kernel/random/boot_id")
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]"
    except OSError:
        return None
    if boot is None:
        return None
    inode = namespace[5:-1] if namespace.startswith("pid:[") and namespace.endswith("]") else namespace
    return f"{boot}/{inode}"


def started(pid: int) -> int | None:
    """When ``pid`` started, in clock ticks since boot, or None when /proc does not say."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    # The command name (field 2) is in parentheses and may hold spaces or parentheses itself.
    fields = text.rpartition(")")[2].split()
    try:
        return int(fields[19])  # field 22; the fields after the name start at field 3
    except (IndexError, ValueError):
        return None


def gone(pid: int, start: int | None) -> bool:
    """True when the process ``pid`` that started at ``start`` (None: not recorded) no
    longer runs here. Only meaningful for a pid recorded under this process's :func:`scope`.
    A pid that cannot be checked (no permission, /proc unreadable) counts as running."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        pass  # PermissionError: it exists, under another user
    if start is None:
        return False
    now = started(pid)
    return now is not None and now != start


def record() -> dict[str, object]:
    """What a heartbeat writes into its ``info`` so that others on this host can judge it."""
    where = scope()
    if where is None:
        return {}
    return {"pid_scope": where, "pid_started": started(os.getpid())}
