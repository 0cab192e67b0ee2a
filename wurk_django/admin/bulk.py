"""The progress page of a bulk action that runs as a job (issue 28 item 6).

"Retry all", "Kill all" and "Enqueue all" over more than :data:`SYNC_LIMIT` entries
are handed to :mod:`wurk_django.api.bulk`; this page shows how far the job got and
reloads itself until it is finished. Smaller sets are still done inside the request.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect

from ..api import Stats, bulk
from .common import redis, render, url

#: Largest set an "all" action still works through inside the request.
SYNC_LIMIT = 1000
#: Seconds between reloads of the progress page while the action runs.
RELOAD_SECONDS = 2

LABELS = {"retry": "Retry all", "add_to_queue": "Enqueue all", "kill": "Kill all"}
KIND_OF_SET = {"schedule": "scheduled", "retry": "retries", "dead": "dead"}


def progress(request: HttpRequest, model_admin: Any, token: str) -> HttpResponse:
    """GET: where the action is. POST ``action=cancel``: stop it after its current chunk."""
    info = bulk.progress(token, redis=redis())
    if info is None:
        raise Http404("no such bulk action (finished ones are kept for a week)")
    kind = KIND_OF_SET.get(info["set"], "dashboard")
    if request.method == "POST":
        if request.POST.get("action") == "cancel" and bulk.cancel(token, redis=redis()):
            messages.info(request, "Cancelling: the job stops after the chunk it is on.")
        return HttpResponseRedirect(url(request, "wurk_bulk", token=token))
    waiting = ""
    if info["state"] == "queued":
        queue = info.get("queue") or "default"
        stats = Stats()
        if queue in {row.name for row in stats.unserved_queues(stats.queue_summaries())}:
            waiting = f"No running worker serves the queue {queue}: the action starts when one does."
        else:
            waiting = f"Waiting for a worker on the queue {queue}."
    context = {
        "info": info,
        "label": LABELS.get(info["action"], info["action"]),
        "kind": kind,
        "back": url(request, "wurk_set", kind=kind) if kind != "dashboard" else url(
            request, "wurk_django_dashboard_changelist"),
        "waiting": waiting,
        "reload": 0 if info["finished"] else RELOAD_SECONDS,
    }
    return render(request, model_admin, "bulk.html", context, section=kind, title=f"{context['label']}: progress")
