"""Shared by ``wurk_quiet`` and ``wurk_stop``: pick processes, send them a signal through
Redis (the ``<identity>-signals`` list each process reads at its heartbeat, as the admin does)."""

from __future__ import annotations

import time
from typing import Any

import redis as redis_lib
from django.core.management.base import BaseCommand, CommandError, CommandParser


class SignalCommand(BaseCommand):
    requires_system_checks: list[str] = []
    action = ""  # "quiet" or "stop"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("identities", nargs="*", metavar="IDENTITY",
                            help="process identities as shown by wurk_stats or the Busy page")
        parser.add_argument("--host", action="append", default=[], metavar="HOSTNAME",
                            help="every process on this host (repeatable)")
        parser.add_argument("--all", action="store_true", help="every live process")
        parser.add_argument("--wait", type=float, metavar="SECONDS",
                            help=self.wait_help)

    wait_help = ""

    def handle(self, *args: Any, **options: Any) -> None:
        from ...api import ProcessSet
        from ...api.process import EmbeddedProcessError

        identities, hosts, every = options["identities"], options["host"], options["all"]
        if not (identities or hosts or every):
            raise CommandError("name the processes: IDENTITY..., --host HOSTNAME or --all")
        try:
            live = list(ProcessSet())
        except redis_lib.RedisError as exc:
            raise CommandError(f"Redis is unreachable: {exc}") from None
        chosen = [p for p in live if every or p.identity in identities or p.get("hostname") in hosts]
        unknown = [i for i in identities if i not in {p.identity for p in live}]
        for identity in unknown:
            self.stderr.write(f"no live process {identity!r}")
        sent = []
        for process in chosen:
            try:
                getattr(process, self.action)()
            except EmbeddedProcessError as exc:
                self.stderr.write(str(exc))
                continue
            sent.append(process.identity)
            self.stdout.write(f"{self.action}: {process.identity}")
        if not sent:
            raise CommandError(f"no process was asked to {self.action}")
        if options.get("wait"):
            self._wait(sent, options["wait"])
        if unknown:
            raise CommandError(f"{len(unknown)} identity(ies) not found")

    def done(self, process: Any) -> bool:
        raise NotImplementedError

    def _wait(self, identities: list[str], seconds: float) -> None:
        from ...api import ProcessSet

        deadline = time.monotonic() + seconds
        while True:
            pending = {p.identity: p for p in ProcessSet(clean=False) if p.identity in identities}
            left = [i for i in identities if i in pending and not self.done(pending[i])]
            if not left:
                self.stdout.write(f"all {len(identities)} process(es) {self.past}")
                return
            if time.monotonic() > deadline:
                raise CommandError(f"still not {self.past} after {seconds:g}s: {', '.join(left)}")
            time.sleep(0.5)

    past = ""
