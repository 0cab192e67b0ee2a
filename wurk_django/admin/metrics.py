"""Metrics pages: per-class executions, failures and time; one class's histogram
(CORE-198, CORE-199, CORE-213, CORE-214)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _

from ..metrics.query import BUCKET_LABELS, MetricsQuery, QueryResult
from .common import Page, keep_query, page_params, render, url

#: period -> (minutes, hours) as Sidekiq's metrics page offers them
PERIODS: dict[str, tuple[int | None, int | None]] = {
    "1h": (60, None), "2h": (120, None), "4h": (240, None), "8h": (480, None),
    "24h": (None, 24), "48h": (None, 48), "72h": (None, 72),
}
DETAIL_PERIODS = ("1h", "2h", "4h", "8h")  # the histogram only exists per minute
TOP = 20  # classes in one page of the table
CHARTED = 5


def _period(request: HttpRequest, allowed: tuple[str, ...]) -> str:
    period = request.GET.get("period", "1h")
    return period if period in allowed else "1h"


def _chart(result: QueryResult, names: list[str], kind: str = "s") -> dict[str, Any]:
    labels = list(reversed(result.buckets))  # oldest first, left to right
    series = []
    for i, name in enumerate(names):
        values = result.job_results[name].series[kind]
        series.append({"name": name, "cls": f"c{i}", "values": [round(values.get(b, 0), 3) for b in labels]})
    return {"labels": [b[11:16] for b in labels], "series": series,
            "marks": [{"at": at[11:16], "label": label} for at, label in result.marks]}


def index(request: HttpRequest, model_admin: Any) -> HttpResponse:
    period = _period(request, tuple(PERIODS))
    minutes, hours = PERIODS[period]
    substr = request.GET.get("substr", "").strip()
    result = MetricsQuery().top_jobs(substr or None, minutes=minutes, hours=hours)
    ranked = result.top(len(result.job_results))
    # Every class seen, a page at a time (TOP a page unless ?count= says otherwise): the
    # 21st class is on page 2, never silently left out.
    number, count = page_params(request, default=TOP)
    page = Page(number=number, count=count, total=len(ranked), base_query=keep_query(request, "period", "substr"))
    top = ranked[page.start:page.start + count]
    page.items = rows = [{
        "name": job.name,
        "url": url(request, "wurk_metrics_job", klass=job.name) + f"?period={period if period in DETAIL_PERIODS else '8h'}",
        "succeeded": job.succeeded,
        "failed": job.failed,
        "processed": job.processed,
        "total_s": job.total_seconds,
        "mean_s": job.mean_seconds,
    } for job in top]
    context = {
        "period": period,
        "periods": [{"key": p, "current": p == period} for p in PERIODS],
        "substr": substr,
        "rows": rows,
        "page": page,
        "chart": _chart(result, [job.name for job in ranked[:CHARTED]]),
        "result": result,
    }
    return render(request, model_admin, "metrics.html", context, section="metrics", title=_("Metrics"))


def detail(request: HttpRequest, model_admin: Any, klass: str) -> HttpResponse:
    period = _period(request, DETAIL_PERIODS)
    minutes, _hours = PERIODS[period]
    result = MetricsQuery().for_job(klass, minutes=minutes)
    job = result.job_results[klass]
    histogram = job.histogram_totals()
    series = [{
        "at": bucket,
        "processed": int(job.series["p"].get(bucket, 0)),
        "failed": int(job.series["f"].get(bucket, 0)),
        "total_s": job.series["s"].get(bucket, 0.0),
    } for bucket in result.buckets if job.series["p"].get(bucket)]
    context = {
        "klass": klass,
        "job": job,
        "period": period,
        "periods": [{"key": p, "current": p == period} for p in DETAIL_PERIODS],
        "histogram": {"labels": list(BUCKET_LABELS), "values": histogram},
        "chart": _chart(result, [klass]),
        "series": series,
        "back": url(request, "wurk_metrics"),
    }
    title = _("Metrics: %(job_class)s") % {"job_class": klass}
    return render(request, model_admin, "metrics_job.html", context, section="metrics", title=title)
