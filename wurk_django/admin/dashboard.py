"""Dashboard page and the JSON/Prometheus endpoints (CORE-190, CORE-191, DJ-054, DJ-056)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from ..api import Stats, StatsHistory, WorkSet
from ..metrics.query import MetricsQuery
from ..redis.cluster_layout import layout_of
from ..redis.errors import memory_limit
from ..redis.eviction import evicted_from_info
from ..redis.layout_client import is_cluster
from .access import bearer_ok  # noqa: F401  (kept importable from here)
from .common import redis, render, servers, summary

HISTORY_CHOICES = (7, 30, 90)
MAX_HISTORY_DAYS = 180  # the history chart offers at most 180 days (CORE-242)


def today_counts() -> dict[str, int]:
    """Processed and failed so far in the current UTC day (CORE-056)."""
    day = datetime.now(UTC).date().isoformat()
    client = redis()
    layout = layout_of(client)  # {stats}:stat:... on a cluster: one slot, one MGET
    processed, failed = client.mget([layout.stat_on("processed", day), layout.stat_on("failed", day)])
    return {"processed": int(processed or 0), "failed": int(failed or 0), "date": day}


def uptime_text(seconds: int) -> str:
    """``"3 days"``, ``"5 h 12 min"``, ``"7 min"``: a fresh server is not "0 days" old.
    In the active language (the JSON ``/stats`` carries it for the page to show)."""
    seconds = max(int(seconds), 0)
    days, rest = divmod(seconds, 86400)
    if days:
        return ngettext("%(count)d day", "%(count)d days", days) % {"count": days}
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    if hours:
        return _("%(hours)d h %(minutes)d min") % {"hours": hours, "minutes": minutes}
    return _("%(minutes)d min") % {"minutes": minutes} if minutes else _("%(seconds)d s") % {"seconds": seconds}


def redis_info() -> dict[str, Any]:
    """Server name, version, uptime, clients and memory for the store cards (CORE-190).
    On a Redis Cluster, over its primaries: clients and memory summed, the shortest
    uptime, the largest peak, the first primary's version, "Redis Cluster" as the name."""
    client = redis()
    if is_cluster(client):
        return _cluster_info([node.info() for node in servers(client)])
    info = client.info()
    if "dragonfly_version" in info:
        name, version = "Dragonfly", info["dragonfly_version"]
    elif "valkey_version" in info:
        name, version = "Valkey", info["valkey_version"]
    else:
        name, version = "Redis", info.get("redis_version", "?")
    return {
        "redis_version": str(info.get("redis_version", version)),
        "uptime_in_days": int(info.get("uptime_in_days", 0)),
        "uptime_in_seconds": int(info.get("uptime_in_seconds", 0)),
        "uptime": uptime_text(int(info.get("uptime_in_seconds", 0))),
        "connected_clients": int(info.get("connected_clients", 0)),
        "used_memory_human": str(info.get("used_memory_human", "")),
        "used_memory_peak_human": str(info.get("used_memory_peak_human", "")),
        "store_name": name,
        "store_version": str(version),
        "memory_full": memory_full(info),
    }


def _cluster_info(infos: list[dict[str, Any]]) -> dict[str, Any]:
    first = infos[0] if infos else {}

    def total(field: str) -> int:
        return sum(int(info.get(field, 0) or 0) for info in infos)

    uptime = min((int(info.get("uptime_in_seconds", 0)) for info in infos), default=0)
    version = str(first.get("valkey_version") or first.get("redis_version", "?"))
    return {
        "redis_version": str(first.get("redis_version", version)),
        "uptime_in_days": uptime // 86400,
        "uptime_in_seconds": uptime,
        "uptime": uptime_text(uptime),
        "connected_clients": total("connected_clients"),
        "used_memory_human": _human(total("used_memory")),
        "used_memory_peak_human": _human(max((int(i.get("used_memory_peak", 0) or 0) for i in infos), default=0)),
        "store_name": (_("Valkey Cluster") if "valkey_version" in first else _("Redis Cluster"))
        + " " + ngettext("(%(count)d primary)", "(%(count)d primaries)", len(infos)) % {"count": len(infos)},
        "store_version": version,
        "memory_full": next((text for text in map(memory_full, infos) if text), ""),
    }


def _human(size: int) -> str:
    """Bytes as Redis's ``*_human`` fields write them (``1.23M``)."""
    value = float(size)
    for unit in ("B", "K", "M", "G", "T"):
        if value < 1024 or unit == "T":
            return f"{int(value)}B" if unit == "B" else f"{value:.2f}{unit}"
        value /= 1024
    return f"{size}B"


def memory_full(info: dict[str, Any]) -> str:
    """The limit in words when Redis is at its ``maxmemory`` and may refuse writes, else ``""``.

    An ``allkeys-*`` policy evicts instead of refusing, so it is left out; ``noeviction``
    and the ``volatile-*`` policies (which refuse once no key with a TTL is left) are not.
    """
    try:
        used, limit = int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))
    except (TypeError, ValueError):
        return ""
    policy = str(info.get("maxmemory_policy", ""))
    if not limit or used < limit or policy.startswith("allkeys"):
        return ""
    return memory_limit(info)


def _days(request: HttpRequest) -> int:
    try:
        days = int(request.GET.get("days", 30))
    except ValueError:
        days = 30
    return min(max(days, 1), MAX_HISTORY_DAYS)


def index(request: HttpRequest, model_admin: Any) -> HttpResponse:
    stats = Stats()
    days = _days(request)
    history = StatsHistory(days)
    processed, failed = history.processed(), history.failed()
    # Oldest first, which is how a chart reads left to right.
    dates = list(reversed(list(processed)))
    chart = {
        "labels": dates,
        "series": [
            {"name": _("Processed"), "cls": "ok", "values": [processed[d] for d in dates]},
            {"name": _("Failed"), "cls": "bad", "values": [failed[d] for d in dates]},
        ],
    }
    context = {
        "stats": stats,
        "today": today_counts(),
        "processes": stats.processes_size,
        "default_latency": stats.default_queue_latency,
        "redis": redis_info(),
        "days": days,
        "day_choices": [{"days": d, "current": d == days} for d in HISTORY_CHOICES],
        "history_chart": chart,
        "history_totals": {"processed": sum(processed.values()), "failed": sum(failed.values())},
        "unserved": stats.unserved_queues(),
        # Without today's count: the page adds the live "today" figure as it polls.
        "history_base": {"processed": sum(v for d, v in processed.items() if d != history.start.isoformat()),
                         "failed": sum(v for d, v in failed.items() if d != history.start.isoformat())},
    }
    return render(request, model_admin, "dashboard.html", context, section="dashboard", title=_("Wurk dashboard"))


def stats_payload() -> dict[str, Any]:
    """The ``/stats`` document, Sidekiq's shape plus ``today`` (CORE-191)."""
    stats = Stats()
    counts = summary(stats)
    return {
        "sidekiq": {
            "processed": counts["processed"],
            "failed": counts["failed"],
            "busy": counts["busy"],
            "processes": stats.processes_size,
            "enqueued": counts["enqueued"],
            "scheduled": counts["scheduled"],
            "retries": counts["retries"],
            "dead": counts["dead"],
            "default_latency": round(stats.default_queue_latency, 3),
        },
        "today": today_counts(),
        "redis": redis_info(),
        "server_utc_time": datetime.now(UTC).strftime("%H:%M:%S UTC"),
    }


def stats_json(request: HttpRequest, model_admin: Any) -> HttpResponse:
    return JsonResponse(stats_payload())


def stats_queues(request: HttpRequest, model_admin: Any) -> HttpResponse:
    return JsonResponse(Stats().queues())


def _label(value: str) -> str:
    """A label value in the Prometheus text format: quoted, with only backslash, double
    quote and newline escaped. Any other character, ``é`` included, is written as UTF-8:
    the format has no ``\\u`` escape, and one such escape fails the whole scrape."""
    escaped = str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    return f'"{escaped}"'


def _running_by_queue_and_class() -> dict[tuple[str, str], int]:
    counts: dict[tuple[str, str], int] = {}
    for _identity, _tid, work in WorkSet():
        key = (work.queue or "", work.job.display_class)
        counts[key] = counts.get(key, 0) + 1
    return counts


def prometheus(request: HttpRequest, model_admin: Any) -> HttpResponse:
    """Counters and gauges in the Prometheus text format (DJ-056)."""
    stats = Stats()
    counts = summary(stats)
    lines = []

    def metric(name: str, kind: str, help_text: str, rows: list[tuple[str, float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in rows:
            lines.append(f"{name}{labels} {value}")

    metric("wurk_processed_total", "counter", "Jobs processed (failures included).", [("", counts["processed"])])
    metric("wurk_failed_total", "counter", "Jobs that raised.", [("", counts["failed"])])
    metric("wurk_busy", "gauge", "Jobs running now.", [("", counts["busy"])])
    metric("wurk_processes", "gauge", "Live worker processes.", [("", stats.processes_size)])
    metric("wurk_enqueued", "gauge", "Jobs waiting in all queues.", [("", counts["enqueued"])])
    metric("wurk_scheduled", "gauge", "Jobs in the scheduled set.", [("", counts["scheduled"])])
    metric("wurk_retries", "gauge", "Jobs waiting for a retry.", [("", counts["retries"])])
    metric("wurk_dead", "gauge", "Jobs in the dead set.", [("", counts["dead"])])
    summaries = stats.queue_summaries()
    metric("wurk_queue_size", "gauge", "Jobs waiting per queue.",
           [(f"{{queue={_label(q.name)}}}", q.size) for q in summaries])
    metric("wurk_queue_latency_seconds", "gauge", "Age of the oldest job per queue.",
           [(f"{{queue={_label(q.name)}}}", round(q.latency, 3)) for q in summaries])
    metric("wurk_queue_paused", "gauge", "1 while the queue is paused.",
           [(f"{{queue={_label(q.name)}}}", int(q.paused)) for q in summaries])
    running = _running_by_queue_and_class()
    metric("wurk_running_jobs", "gauge", "Jobs running now, per queue and job class.",
           [(f"{{queue={_label(queue)},class={_label(klass)}}}", n) for (queue, klass), n in sorted(running.items())])
    # Per-class execution figures over the last hour, from the Sidekiq 8 metrics
    # buckets (the same numbers as the Metrics tab): gauges, not counters,
    # because the buckets expire and a class total cannot be kept monotonic.
    hour = MetricsQuery().top_jobs(minutes=60)
    classes = sorted(hour.job_results.values(), key=lambda r: r.name)
    metric("wurk_job_executions_last_hour", "gauge", "Executions per job class in the last 60 minutes.",
           [(f"{{class={_label(r.name)}}}", r.processed) for r in classes])
    metric("wurk_job_failures_last_hour", "gauge", "Failed executions per job class in the last 60 minutes.",
           [(f"{{class={_label(r.name)}}}", r.failed) for r in classes])
    metric("wurk_job_seconds_last_hour", "gauge", "Seconds spent by successful runs per job class, last 60 minutes.",
           [(f"{{class={_label(r.name)}}}", round(r.total_seconds, 3)) for r in classes])
    readings = [evicted_from_info(node.info("stats")) for node in servers()]
    counted = [n for n in readings if n is not None]
    evicted = sum(counted) if counted else None  # over every primary on a cluster
    if evicted is not None:  # a look-alike server without the field: no sample rather than a false 0
        metric("wurk_redis_evicted_keys", "counter",
               "Keys Redis evicted since it started (INFO stats evicted_keys): with a policy other than "
               "noeviction, a queue, schedule or retry set may be among them.", [("", evicted)])
    return HttpResponse("\n".join(lines) + "\n", content_type="text/plain; version=0.0.4; charset=utf-8")
