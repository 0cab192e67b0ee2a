"""``python manage.py wurk_stats``: the dashboard's numbers on the command line (DJ-046)."""

from __future__ import annotations

import json
import time
from typing import Any

import redis as redis_lib
from django.core.management.base import BaseCommand, CommandError, CommandParser


def snapshot() -> dict[str, Any]:
    """The dashboard's figures: totals, today, Redis, per-queue size/latency/paused, processes."""
    from ...admin.dashboard import stats_payload
    from ...api import ProcessSet, Stats

    data = stats_payload()
    stats = Stats()
    summaries = stats.queue_summaries()
    unserved = {q.name for q in stats.unserved_queues(summaries)}
    data["queues"] = [
        {"name": q.name, "size": q.size, "latency": round(q.latency, 3), "paused": q.paused,
         "unserved": q.name in unserved}
        for q in summaries
    ]
    data["processes"] = [
        {"identity": p.identity, "tag": p.tag, "busy": p.get("busy", 0), "concurrency": p.get("concurrency", 0),
         "quiet": p.stopping, "queues": p.queues, "embedded": p.embedded,
         "capsules": {str(name): {"concurrency": (c or {}).get("concurrency", 0),
                                  "queues": list((c or {}).get("weights") or {})}
                      for name, c in p.capsules.items()}}
        for p in ProcessSet()
    ]
    return data


def as_text(data: dict[str, Any]) -> str:
    totals, today, store = data["sidekiq"], data["today"], data["redis"]
    lines = [
        f"Processed   {totals['processed']:>12}   today {today['processed']}",
        f"Failed      {totals['failed']:>12}   today {today['failed']}",
        f"Busy        {totals['busy']:>12}",
        f"Processes   {totals['processes']:>12}",
        f"Enqueued    {totals['enqueued']:>12}",
        f"Scheduled   {totals['scheduled']:>12}",
        f"Retries     {totals['retries']:>12}",
        f"Dead        {totals['dead']:>12}",
        f"Latency     {totals['default_latency']:>11.3f}s   (queue default)",
        f"{store['store_name']} {store['store_version']}, {store['connected_clients']} clients, "
        f"{store['used_memory_human']} used",
    ]
    if data["queues"]:
        width = max(len(q["name"]) for q in data["queues"])
        lines.append("")
        lines.append(f"{'Queue':<{width}}  {'Size':>8}  {'Latency':>9}")
        for q in data["queues"]:
            paused = "  paused" if q["paused"] else ""
            unserved = "  no live process serves it" if q.get("unserved") else ""
            lines.append(f"{q['name']:<{width}}  {q['size']:>8}  {q['latency']:>8.3f}s{paused}{unserved}")
    if data["processes"]:
        lines.append("")
        for p in data["processes"]:
            state = "quiet" if p["quiet"] else "running"
            capsules = p.get("capsules") or {}
            if len(capsules) > 1:  # each capsule's threads and queues (CORE-100)
                served = "; ".join(f"{name} ({c['concurrency']}): {','.join(c['queues'])}"
                                   for name, c in capsules.items())
            else:
                served = ",".join(p["queues"])
            lines.append(f"{p['identity']}  {p['busy']}/{p['concurrency']} busy  {state}  [{served}]")
    return "\n".join(lines)


class Command(BaseCommand):
    help = "Show the job counters, queues and worker processes (the admin dashboard's numbers)."
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--json", action="store_true", help="print one JSON document")
        parser.add_argument("--interval", type=float, metavar="SECONDS",
                            help="print again every SECONDS until interrupted")
        parser.add_argument("--count", type=int, metavar="N", help="with --interval: stop after N reports")

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options.get("interval")
        if interval is not None and interval <= 0:
            raise CommandError(f"--interval must be more than 0 seconds, not {interval}")
        count = options.get("count")
        shown = 0
        try:
            while True:
                try:
                    data = snapshot()
                except redis_lib.RedisError as exc:
                    raise CommandError(f"Redis is unreachable: {exc}") from None
                self.stdout.write(json.dumps(data, sort_keys=True) if options["json"] else as_text(data))
                self.stdout.flush()
                shown += 1
                if interval is None or (count is not None and shown >= count):
                    return
                if not options["json"]:
                    self.stdout.write("")
                time.sleep(interval)
        except KeyboardInterrupt:
            return
