"""``python manage.py wurk_quiet``: ask worker processes to stop fetching jobs (DJ-046)."""

from __future__ import annotations

from typing import Any

from ._signal_processes import SignalCommand


class Command(SignalCommand):
    help = ("Quiet worker processes: they finish their running jobs and fetch no more. "
            "They act at their next heartbeat (within 10 seconds).")
    action = "quiet"
    past = "quiet"
    wait_help = "wait up to SECONDS until every process reports itself quiet"

    def done(self, process: Any) -> bool:
        return process.stopping
