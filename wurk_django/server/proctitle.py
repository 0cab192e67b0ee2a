"""The process title: ``wurk <version> <tag> [<busy> of <total> busy]`` (+ ``stopping``).

With the optional ``setproctitle`` package installed the whole title shows in
``ps`` and ``top``. Without it, on Linux, a short form (``wurk 2/5``) goes to
the process name (``/proc/self/comm``, 15 characters at most), which ``top``
and ``ps -o comm`` show. Anywhere else, nothing happens.
"""

from __future__ import annotations

import os

try:
    from setproctitle import setproctitle as _setproctitle
except ImportError:  # optional
    _setproctitle = None

COMM_MAX = 15


def title(version: str, tag: str, busy: int, total: int, stopping: bool) -> str:
    text = f"wurk {version} {tag} [{busy} of {total} busy]".replace("  ", " ")
    return text + " stopping" if stopping else text


def short_title(busy: int, total: int, stopping: bool) -> str:
    return ("wurk stopping" if stopping else f"wurk {busy}/{total}")[:COMM_MAX]


def set_title(version: str, tag: str, busy: int, total: int, stopping: bool) -> None:
    """Best effort: never raises."""
    try:
        if _setproctitle is not None:
            _setproctitle(title(version, tag, busy, total, stopping))
        elif os.path.exists("/proc/self/comm"):
            with open(f"/proc/{os.getpid()}/comm", "w") as comm:
                comm.write(short_title(busy, total, stopping))
    except Exception:  # the title is cosmetic: it must never disturb a job or the worker
        pass
