"""``python manage.py wurk_check_periodic``: validate the periodic jobs without starting a worker."""

from __future__ import annotations

import time

from django.core.management.base import BaseCommand, CommandError
from django.utils.module_loading import autodiscover_modules

from ...conf import raw_settings
from ...periodic.config import build_loop, entry_loop, resolve_job, zone_warnings
from ...periodic.registration import code_registrations


class Command(BaseCommand):
    help = ("Check WURK['PERIODIC'] and periodic.register() calls: cron strings, job classes, options and "
            "time zones; print each loop's id and next run. Touches no Redis. Exits 1 on an error.")
    requires_system_checks: list[str] = []  # this command is the check; it reports every problem itself

    def handle(self, *args, **options) -> None:
        raw = raw_settings()
        entries = raw.get("PERIODIC") or []
        # Import the job modules as a worker does at boot, so classes resolve the same way.
        autodiscover = raw.get("AUTODISCOVER", ["jobs", "tasks"])
        if isinstance(autodiscover, (list, tuple)):
            autodiscover_modules(*autodiscover)
        errors: list[str] = []
        found = []
        if not isinstance(entries, (list, tuple)):
            raise CommandError(f"WURK['PERIODIC'] must be a list, not {type(entries).__name__}")
        for index, entry in enumerate(entries):
            try:
                found.append((f"settings entry {index}", entry_loop(entry)))
            except ValueError as exc:
                errors.append(f"settings entry {index}: {exc}")
        for cron, job, tz, opts in code_registrations():
            try:
                found.append((f"register({cron!r}, {job!r})", build_loop(cron, job, tz, opts)))
            except ValueError as exc:
                errors.append(f"register({cron!r}, {job!r}): {exc}")
        now = time.time()
        for where, loop in found:
            try:
                resolve_job(loop.klass)
            except ValueError as exc:
                errors.append(f"{where}: {exc}")
                continue
            upcoming = loop.next_fire_at(now)
            when = loop.local(upcoming).strftime("%Y-%m-%d %H:%M %Z") if upcoming else "never"
            self.stdout.write(f"ok  {loop.lid}  {loop.schedule!r} ({loop.describe()}, {loop.tz})  "
                              f"{loop.klass} -> {loop.queue}  next: {when}")
        for warning in zone_warnings(entries):
            self.stderr.write(f"warning: {warning}")
        for error in errors:
            self.stderr.write(f"error: {error}")
        if errors:
            raise CommandError(f"{len(errors)} periodic job problem(s)", returncode=1)
        self.stdout.write(f"{len(found)} periodic job(s) OK")
