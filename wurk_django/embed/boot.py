"""Whether this process runs wurk workers, decided once at Django boot (DJ-060, RUN-840..842).

``WurkConfig.ready()`` calls :func:`on_ready`, which only *decides and records*:
it opens no Redis connection, starts no thread and runs no query. Django runs
``ready()`` for every management command, twice under the runserver reloader,
and in the gunicorn master under ``--preload`` — threads started there would be
inherited half-dead by every fork. The actual start happens later, in an entry
point that runs in the process that will serve: the gunicorn hooks
(:mod:`wurk_django.gunicorn`), the ASGI lifespan wrapper (:mod:`wurk_django.asgi`)
or, as a last resort, the first request this process handles.

The decision itself is :func:`decide`, a pure function of the mode, the command
line, the environment and the loaded modules, so every case can be tested
without booting anything.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..conf import raw_settings

logger = logging.getLogger("wurk_django.boot")

SKIP = "skip"
EMBEDDED = "embedded"
SWARM = "swarm"
REFUSE = "refuse"

#: Management commands that serve HTTP; every other command is a one-off task.
SERVER_COMMANDS = frozenset({"runserver"})
#: Program names that mean "a Django management command follows".
_MANAGE_PROGRAMS = frozenset({"manage.py", "django-admin", "django-admin.py"})
_TRUTHY = frozenset({"1", "true", "yes", "on"})

SWARM_HINT = "run the workers with `python manage.py wurk --processes N` instead"


@dataclass(frozen=True)
class Decision:
    """What this process does about wurk workers, and why (for the log)."""

    action: str  # SKIP, EMBEDDED, SWARM or REFUSE
    reason: str
    #: The serving process forks its workers itself (gunicorn, uWSGI): no co-hosted swarm there.
    preforking: bool = False

    @property
    def embedded(self) -> bool:
        return self.action == EMBEDDED


def management_command(argv: Sequence[str]) -> str | None:
    """The Django management command ``argv`` runs, or None when it is not ``manage.py``-like."""
    if not argv:
        return None
    program = os.path.basename(str(argv[0]))
    # ``python -m django`` puts the path of django/__main__.py in argv[0].
    via_module = program == "__main__.py" and os.path.basename(os.path.dirname(str(argv[0]))) == "django"
    if program not in _MANAGE_PROGRAMS and not via_module:
        return None
    return str(argv[1]) if len(argv) > 1 else "help"


def _preforking(environ: Mapping[str, str], modules: Mapping[str, Any] | Sequence[str]) -> bool:
    # The gunicorn arbiter exports SERVER_SOFTWARE before it loads the app; uWSGI
    # makes its ``uwsgi`` module importable only inside its own processes.
    return str(environ.get("SERVER_SOFTWARE", "")).startswith("gunicorn/") or "uwsgi" in modules


def decide(mode: str, argv: Sequence[str], environ: Mapping[str, str],
           modules: Mapping[str, Any] | Sequence[str]) -> Decision:
    """Pick the boot for one process; the first matching rule wins (RUN-841).

    ``mode`` is ``WURK["MODE"]``; ``argv``, ``environ`` and ``modules`` stand for
    ``sys.argv``, ``os.environ`` and ``sys.modules``.
    """
    if mode in ("off", "standalone"):
        return Decision(SKIP, f'WURK["MODE"] is "{mode}": workers run under `manage.py wurk`')
    if str(environ.get("WURK_DISABLED", "")).strip().lower() in _TRUTHY:
        return Decision(SKIP, "WURK_DISABLED is set")
    command = management_command(argv)
    if "pytest" in modules or command == "test":
        return Decision(SKIP, "running tests")
    if command == "wurk":
        # The command boots its own worker; a second one in-process would double it.
        return Decision(SKIP, "`manage.py wurk` runs the worker itself")
    if command is not None and command not in SERVER_COMMANDS:
        return Decision(SKIP, f"management command {command!r} serves nothing")
    if command == "runserver" and "--noreload" not in argv and environ.get("RUN_MAIN") != "true":
        return Decision(SKIP, "runserver autoreloader parent; the child it starts runs the server")
    preforking = _preforking(environ, modules)
    if mode == EMBEDDED:
        return Decision(EMBEDDED, "embedded worker threads in each web process", preforking)
    if mode == SWARM:
        if preforking:
            return Decision(REFUSE, 'WURK["MODE"] = "swarm" cannot fork workers from inside a preforking web server; '
                                    f'use MODE "embedded" there, or {SWARM_HINT}', preforking)
        return Decision(SWARM, "swarm supervisor co-hosted in the web process", preforking)
    return Decision(REFUSE, f'unknown WURK["MODE"] {mode!r}')


_lock = threading.Lock()
_recorded: tuple[int, Decision] | None = None


def _decide_now() -> Decision:
    try:
        mode = raw_settings().get("MODE", "off")
    except Exception as exc:  # a broken WURK is reported by the system checks, not by booting
        return Decision(SKIP, f"settings.WURK is unusable: {exc}")
    return decide(str(mode), sys.argv, os.environ, sys.modules)


def current() -> Decision:
    """This process's decision; a forked child decides afresh from what it inherited."""
    global _recorded
    with _lock:
        if _recorded is None or _recorded[0] != os.getpid():
            _recorded = (os.getpid(), _decide_now())
        return _recorded[1]


def on_ready() -> Decision:
    """Decide and record, nothing else (RUN-840). Idempotent: ``ready()`` may run twice."""
    already = _recorded is not None and _recorded[0] == os.getpid()
    decision = current()
    if already:
        return decision
    if decision.action == REFUSE:
        logger.warning("wurk: not starting workers in this process: %s", decision.reason)
    else:
        logger.debug("wurk boot: %s (%s)", decision.action, decision.reason)
    if decision.action == EMBEDDED:
        from django.core.signals import request_started

        # The last-resort entry point (RUN-842): servers without a hook of ours
        # (runserver, a gunicorn without our config) start on their first request.
        request_started.connect(_first_request, dispatch_uid="wurk_django.boot.first_request")
    return decision


def _first_request(**kwargs: Any) -> None:
    from . import embedded

    if not embedded.attempted():
        start("first request")


def start(source: str, *, drain_timeout: float | None = None) -> bool:
    """Entry points call this once the process serves: start what :func:`current` decided.

    True when embedded workers run (or were already running) in this process.
    """
    decision = current()
    if decision.action == EMBEDDED:
        # Lazy: the embedded worker loads the engine, which a process that only
        # decides (every web process, every management command) never needs.
        from . import embedded

        return embedded.start(drain_timeout=drain_timeout, source=source)
    if decision.action == SWARM:
        return _hand_over_to_swarm(source)
    if decision.action == REFUSE:
        logger.warning("wurk: not starting workers from %s: %s", source, decision.reason)
    return False


def _hand_over_to_swarm(source: str) -> bool:
    """Give the process to the swarm supervisor, when one that can be co-hosted is installed (RUN-411)."""
    # Lazy: looked up at the moment of hand-over, so a build without the swarm (or a
    # test standing in for it) is seen as such; a web process never loads it otherwise.
    try:
        from ..server import swarm
    except ImportError:
        swarm = None
    entry = getattr(swarm, "start_cohosted", None)
    if entry is None:
        logger.error('wurk: WURK["MODE"] = "swarm" cannot start from %s: this wurk_django has no co-hosted '
                     "swarm supervisor; %s", source, SWARM_HINT)
        return False
    return bool(entry())
