"""Busy page: live processes, quiet/stop, and the jobs running now (CORE-192)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse

from ..api import EmbeddedProcessError, ProcessSet, WorkSet
from .common import args_text, redirect_back, render, url, when

ACTIONS = {"quiet": "Quiet", "stop": "Stop"}


def _signal(request: HttpRequest) -> None:
    action = request.POST.get("action")
    if action not in ACTIONS:
        messages.error(request, "Unknown action.")
        return
    identity = request.POST.get("identity")
    processes = ProcessSet()
    if identity:
        process = processes.get(identity)
        if process is None:
            messages.error(request, f"No live process {identity}.")
            return
        try:
            getattr(process, action)()
        except EmbeddedProcessError:
            messages.error(request, f"{process.identity} runs embedded in a web server: "
                                    "quiet or stop it through that server instead.")
            return
        messages.success(request, f"{ACTIONS[action]} sent to {process.identity}; it acts at its next beat.")
        return
    sent = skipped = 0
    for process in processes:
        if process.embedded:
            skipped += 1  # the host server owns their lifecycle (CORE-160)
            continue
        getattr(process, action)()
        sent += 1
    note = f" ({skipped} embedded skipped)" if skipped else ""
    messages.success(request, f"{ACTIONS[action]} sent to {sent} process{'es' if sent != 1 else ''}{note}.")


def _capsules(process: Any) -> list[dict[str, Any]]:
    """The process's capsules (CORE-100) as the page lists them: name, threads, queues."""
    rows = []
    for name, capsule in process.capsules.items():
        capsule = capsule if isinstance(capsule, dict) else {}
        try:
            concurrency = int(capsule.get("concurrency") or 0)
        except (TypeError, ValueError):
            concurrency = 0
        rows.append({"name": str(name), "concurrency": concurrency, "queues": list(capsule.get("weights") or {})})
    return rows


def index(request: HttpRequest, model_admin: Any) -> HttpResponse:
    if request.method == "POST":
        _signal(request)
        return redirect_back(request, url(request, "wurk_busy"))
    processes = []
    threads = busy = rss = 0
    capsule_of: dict[tuple[str, str], str] = {}  # (identity, queue) -> the capsule serving it there
    for process in ProcessSet():
        concurrency = int(process.get("concurrency") or 0)
        threads += concurrency
        busy += int(process.get("busy") or 0)
        rss += int(process.get("rss") or 0)
        for name, capsule in process.capsules.items():
            for queue in (capsule or {}).get("weights") or {}:
                capsule_of[(process.identity, queue)] = name
        processes.append({
            "identity": process.identity,
            "hostname": process.get("hostname", ""),
            "pid": process.get("pid", ""),
            "tag": process.tag,
            "labels": process.labels,
            "queues": process.queues,
            "capsules": _capsules(process),
            "concurrency": concurrency,
            "busy": int(process.get("busy") or 0),
            "rss_kb": int(process.get("rss") or 0),
            "beat": when(process.get("beat")),
            "started_at": process.started_at,
            "quiet": process.stopping,
            "embedded": process.embedded,
            "leader": process.leader,
            "version": process.version,
        })
    jobs = []
    for identity, tid, work in WorkSet():
        record = work.job
        jobs.append({
            "identity": identity,
            "tid": tid,
            "queue": work.queue,
            "capsule": capsule_of.get((identity, work.queue), ""),
            "klass": record.display_class,
            "jid": record.jid,
            "args": args_text(record),
            "run_at": work.run_at,
        })
    context = {
        "processes": processes,
        "jobs": jobs,
        "totals": {
            "processes": len(processes),
            "threads": threads,
            "busy": busy,
            "utilization": round(100 * busy / threads) if threads else 0,
            "rss_kb": rss,
        },
        "any_signalable": any(not p["embedded"] for p in processes),
    }
    return render(request, model_admin, "busy.html", context, section="busy", title="Busy")
