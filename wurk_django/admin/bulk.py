"""The progress page of a bulk action that runs as a job (issue 28 item 6).

"Retry all", "Kill all" and "Enqueue all" over more than :data:`SYNC_LIMIT` entries
are handed to :mod:`wurk_django.api.bulk`; this page shows how far the job got and
reloads itself until it is finished. Smaller sets are still done inside the request.
"""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, pgettext_lazy

from ..api import Stats, bulk
from .common import redis, render, url

#: Largest set an "all" action still works through inside the request.
SYNC_LIMIT = 1000
#: Seconds between reloads of the progress page while the action runs.
RELOAD_SECONDS = 2

LABELS = {"retry": gettext_lazy("Retry all"), "add_to_queue": gettext_lazy("Enqueue all"),
          "kill": gettext_lazy("Kill all")}
#: How the action's state reads on the page (``data-state`` keeps the name).
STATES = {
    "queued": pgettext_lazy("bulk action state", "queued"),
    "running": pgettext_lazy("bulk action state", "running"),
    "done": pgettext_lazy("bulk action state", "done"),
    "cancelled": pgettext_lazy("bulk action state", "cancelled"),
}
KIND_OF_SET = {"schedule": "scheduled", "retry": "retries", "dead": "dead"}


def progress(request: HttpRequest, model_admin: Any, token: str) -> HttpResponse:
    """GET: where the action is. POST ``action=cancel``: stop it after its current chunk."""
    info = bulk.progress(token, redis=redis())
    if info is None:
        raise Http404(_("no such bulk action (finished ones are kept for a week)"))
    kind = KIND_OF_SET.get(info["set"], "dashboard")
    if request.method == "POST":
        if request.POST.get("action") == "cancel" and bulk.cancel(token, redis=redis()):
            messages.info(request, _("Cancelling: the job stops after the chunk it is on."))
        return HttpResponseRedirect(url(request, "wurk_bulk", token=token))
    waiting = ""
    if info["state"] == "queued":
        queue = info.get("queue") or "default"
        stats = Stats()
        if queue in {row.name for row in stats.unserved_queues(stats.queue_summaries())}:
            waiting = _("No running worker serves the queue %(queue)s: the action starts when one does.") % {
                "queue": queue}
        else:
            waiting = _("Waiting for a worker on the queue %(queue)s.") % {"queue": queue}
    context = {
        "info": info,
        "label": LABELS.get(info["action"], info["action"]),
        "state_label": STATES.get(info["state"], info["state"]),
        "kind": kind,
        "back": url(request, "wurk_set", kind=kind) if kind != "dashboard" else url(
            request, "wurk_django_dashboard_changelist"),
        "waiting": waiting,
        "reload": 0 if info["finished"] else RELOAD_SECONDS,
    }
    title = _("%(action)s: progress") % {"action": context["label"]}
    return render(request, model_admin, "bulk.html", context, section=kind, title=title)
