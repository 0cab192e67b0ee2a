"""``python manage.py wurk_stop``: ask worker processes to shut down gracefully (DJ-046)."""

from __future__ import annotations

from typing import Any

from ._signal_processes import SignalCommand


class Command(SignalCommand):
    help = ("Stop worker processes: each finishes its running jobs within its timeout, gives "
            "back the rest and exits. They act at their next heartbeat (within 10 seconds).")
    action = "stop"
    past = "stopped"
    wait_help = "wait up to SECONDS until every process has gone"

    def done(self, process: Any) -> bool:
        return False  # a process still listed has not gone yet
