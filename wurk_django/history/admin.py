"""The Historical admin page: throughput, queue size and latency over 24 h / 7 d / 30 d,
the snapshot stream, with deploy marks over the charts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from ..api import Deploy
from . import RANGES, history, queue_history, recent

LABEL_FORMATS = {"1m": "%H:%M", "5m": "%m-%d %H:%M", "1h": "%m-%d %H:00"}
MAX_QUEUE_SERIES = 5  # colours c0..c4
SNAPSHOT_NAMES = {"enqueued": gettext_lazy("Enqueued"), "retries": gettext_lazy("Retries"),
                  "dead": gettext_lazy("Dead"), "scheduled": gettext_lazy("Scheduled"), "busy": gettext_lazy("Busy")}


def urls(model_admin: Any) -> list:
    return [path("history/", model_admin.wrap(index), name="wurk_history")]


def _label(start: float, bucket: str) -> str:
    return datetime.fromtimestamp(start, tz=UTC).strftime(LABEL_FORMATS[bucket])


def _marks(points: list[dict], bucket: str, step: int) -> list[dict[str, str]]:
    """Deploy marks in range, each placed on the bucket it falls in."""
    if not points:
        return []
    first, last = points[0]["at"], points[-1]["at"] + step
    deploy = Deploy()
    day = datetime.fromtimestamp(first, tz=UTC).date()
    end = datetime.fromtimestamp(last, tz=UTC).date()
    marks = []
    while day <= end:
        for iso, label in deploy.fetch(day).items():
            at = datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
            if first <= at < last:
                marks.append({"at": _label(at // step * step, bucket), "label": label})
        day += timedelta(days=1)
    return marks


def index(request: HttpRequest, model_admin: Any) -> HttpResponse:
    from ..admin.common import render

    chosen = request.GET.get("range", "24h")
    if chosen not in RANGES:
        chosen = "24h"
    bucket, window = RANGES[chosen]
    from .rollup import BUCKETS

    step = BUCKETS[bucket]
    points = history(bucket, window)
    labels = [_label(p["at"], bucket) for p in points]
    marks = _marks(points, bucket, step)
    throughput = {"labels": labels, "marks": marks, "series": [
        {"name": _("Processed"), "cls": "ok", "values": [p["processed"] for p in points]},
        {"name": _("Failed"), "cls": "bad", "values": [p["failed"] for p in points]},
    ]}
    runtime = {"labels": labels, "marks": marks, "series": [
        {"name": _("Mean run time (ms)"), "cls": "c2",
         "values": [round(p["runtime_ms"] / max(p["processed"] - p["failed"], 1), 1) for p in points]},
    ]}
    queues = sorted(queue_history(bucket, window), key=lambda q: -max((pt["size"] for pt in q["points"]), default=0))
    shown = queues[:MAX_QUEUE_SERIES]
    sizes = {"labels": labels, "marks": marks, "series": [
        {"name": q["name"], "cls": f"c{i}", "values": [pt["size"] for pt in q["points"]]} for i, q in enumerate(shown)]}
    latencies = {"labels": labels, "marks": marks, "series": [
        {"name": q["name"], "cls": f"c{i}", "values": [pt["latency"] for pt in q["points"]]}
        for i, q in enumerate(shown)]}
    snapshots = recent(500)
    snapshot_chart = None
    if snapshots:
        names = [n for n in ("enqueued", "retries", "dead", "scheduled", "busy") if n in snapshots[-1]]
        snapshot_chart = {"labels": [datetime.fromtimestamp(s["at"], tz=UTC).strftime("%m-%d %H:%M:%S")
                                     for s in snapshots],
                          "series": [{"name": SNAPSHOT_NAMES[n], "cls": f"c{i}",
                                      "values": [s.get(n, 0) for s in snapshots]}
                                     for i, n in enumerate(names)]}
    context = {
        "range": chosen,
        "ranges": [{"key": k, "current": k == chosen} for k in RANGES],
        "throughput": throughput,
        "runtime": runtime,
        "sizes": sizes,
        "latencies": latencies,
        "snapshots": snapshot_chart,
        "totals": {"processed": sum(p["processed"] for p in points), "failed": sum(p["failed"] for p in points)},
        "more_queues": len(queues) - len(shown),
        "marks": marks,
        "empty": not any(p["processed"] or p["failed"] for p in points) and not queues,
    }
    return render(request, model_admin, "history.html", context, section="history", title=_("Historical"))
