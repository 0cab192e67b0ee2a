"""Busy page: live processes, quiet/stop, and the jobs running now (CORE-192)."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from .. import keys
from ..api import EmbeddedProcessError, ProcessSet, WorkSet
from ..api.revoke import revoke
from ..redis.cluster_layout import known_queues, layout_of
from .common import Page, args_text, keep_query, page_params, redirect_back, redis, render, url, when
from .sets import deadline_of

ACTIONS = ("quiet", "stop")
BUSY_COUNT = 100  # rows per page of each table, as Sidekiq's Busy page
ONLY = ("processes", "jobs")


def stop_job(request: HttpRequest) -> None:
    """The Stop button of a running job: revoke it with terminate (soft stop, then hard),
    recorded in the dead set under the signed-in user's name."""
    jid = request.POST.get("jid", "")
    if not jid.strip():
        messages.error(request, _("No job named."))
        return
    revoke(jid, by=request.user.get_username() or None, terminate=True)
    messages.success(request, _("Stop sent for job %(jid)s: its process raises the soft stop at once (at its next "
                                "beat if it cannot hear now), then stops it for good after the grace period.")
                     % {"jid": jid})


def _signal(request: HttpRequest) -> None:
    action = request.POST.get("action")
    if action == "stop_job":
        stop_job(request)
        return
    if action not in ACTIONS:
        messages.error(request, _("Unknown action."))
        return
    identity = request.POST.get("identity")
    processes = ProcessSet()
    if identity:
        process = processes.get(identity)
        if process is None:
            messages.error(request, _("No live process %(identity)s.") % {"identity": identity})
            return
        try:
            getattr(process, action)()
        except EmbeddedProcessError:
            messages.error(request, _("%(identity)s runs embedded in a web server: quiet or stop it through that "
                                      "server instead.") % {"identity": process.identity})
            return
        sent_to = (_("Quiet sent to %(identity)s; it acts at its next beat.") if action == "quiet"
                   else _("Stop sent to %(identity)s; it acts at its next beat."))
        messages.success(request, sent_to % {"identity": process.identity})
        return
    sent = skipped = 0
    for process in processes:
        if process.embedded:
            skipped += 1  # the host server owns their lifecycle (CORE-160)
            continue
        getattr(process, action)()
        sent += 1
    if action == "quiet":
        text = ngettext("Quiet sent to %(count)d process.", "Quiet sent to %(count)d processes.", sent)
    else:
        text = ngettext("Stop sent to %(count)d process.", "Stop sent to %(count)d processes.", sent)
    messages.success(request, text % {"count": sent})
    if skipped:
        messages.info(request, ngettext("%(count)d embedded process skipped: its web server owns it.",
                                        "%(count)d embedded processes skipped: their web servers own them.",
                                        skipped) % {"count": skipped})


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


def _progress(rows: list[dict[str, Any]], tracked: list[str]) -> None:
    """Each shown running job's status record, for its progress bar (issue 47 item 2): one
    round trip for the page, none when no job shown keeps a record. A job tracked by its
    class gets a bar from its start; a Celery or ``django.tasks`` one once it reports."""
    shown = [row["jid"] for row in rows if row["jid"] in tracked]
    if not shown:
        return
    from .. import status

    found = status.get_many(shown, redis=redis())
    for row in rows:
        record = found.get(row["jid"])
        if record is not None and (record.progress is not None or row["tracked"]):
            row["status"] = record


def held_lists() -> int:
    """How many private lists hold jobs back (``ZCARD`` of the held index; on a Redis
    Cluster the index is per queue: summed over the known queues)."""
    client = redis()
    layout = layout_of(client)
    if not layout.cluster:
        return int(client.zcard(keys.HELD_INDEX) or 0)
    names = known_queues(client)
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.zcard(layout.held_index(name))
    return sum(int(n or 0) for n in pipe.execute()) if names else 0


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
    tracked = []  # running jobs that keep a status record: their progress bars
    for identity, tid, work in WorkSet():
        record = work.job
        item = record.item if isinstance(record.item, dict) else {}
        if record.jid and ("track" in item or "result_ttl" in item or "task" in item):
            tracked.append(record.jid)
        jobs.append({
            "identity": identity,
            "tid": tid,
            "queue": work.queue,
            "capsule": capsule_of.get((identity, work.queue), ""),
            "klass": record.display_class,
            "jid": record.jid,
            "args": args_text(record),
            "run_at": work.run_at,
            "deadline": deadline_of(record),
            "tracked": "track" in item,
        })
    # Both tables page by the same ``page``/``count``; ``only`` shows one of them. The
    # cards above count every process, whatever page is shown.
    number, count = page_params(request, BUSY_COUNT)
    only = request.GET.get("only") if request.GET.get("only") in ONLY else None
    query = keep_query(request, "only")
    process_page = Page(number, count, len(processes), processes[(number - 1) * count:number * count], query)
    job_page = Page(number, count, len(jobs), jobs[(number - 1) * count:number * count], query)
    _progress(job_page.items, tracked)
    context = {
        "processes": process_page.items,
        "jobs": job_page.items,
        "process_page": process_page,
        "job_page": job_page,
        "only": only,
        "totals": {
            "processes": len(processes),
            "threads": threads,
            "busy": busy,
            "utilization": round(100 * busy / threads) if threads else 0,
            "rss_kb": rss,
        },
        "any_signalable": any(not p["embedded"] for p in processes),
        # Lists of jobs held back as poison-pill suspects (their page: held.py).
        "held_lists": held_lists(),
    }
    return render(request, model_admin, "busy.html", context, section="busy", title=_("Busy"))
