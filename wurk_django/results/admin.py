"""The job status page (issue 47 item 2): one job's record (state, progress, result, error,
timings) at ``status/<jid>/``, and its JSON at ``status/<jid>.json``, which the progress
bars of this page and of the Busy page read to update live (``wurk.js``)."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from .. import payload, status

#: Each state's name on the page, in the reader's language.
STATE_LABELS = {
    "enqueued": pgettext_lazy("job status", "enqueued"),
    "scheduled": pgettext_lazy("job status", "scheduled"),
    "running": pgettext_lazy("job status", "running"),
    "retrying": pgettext_lazy("job status", "retrying"),
    "interrupted": pgettext_lazy("job status", "interrupted"),
    "complete": pgettext_lazy("job status", "complete"),
    "failed": pgettext_lazy("job status", "failed"),
    "revoked": pgettext_lazy("job status", "revoked"),
}


def urls(model_admin: Any) -> list:
    return [
        path("status/<str:jid>/", model_admin.wrap(detail), name="wurk_status"),
        path("status/<str:jid>.json", model_admin.api(as_json), name="wurk_status_json"),
    ]


def _read(jid: str) -> status.Status | None:
    from ..admin.common import redis

    return status.get(jid, redis=redis()) if status.valid_id(jid) else None


def detail(request: HttpRequest, model_admin: Any, jid: str) -> HttpResponse:
    from ..admin.common import render

    found = _read(jid)
    context = {"jid": jid, "found": found, "missing": found is None,
               "state_label": STATE_LABELS.get(found.state, found.state) if found is not None else "",
               "result": payload.dumps(found.result).decode() if found is not None else "",
               "errors": list(reversed(found.errors)) if found is not None else []}
    return render(request, model_admin, "status.html", context, section="busy",
                  title=_("Job %(jid)s") % {"jid": jid}, status=200 if found is not None else 404)


def as_json(request: HttpRequest, model_admin: Any, jid: str) -> HttpResponse:
    found = _read(jid)
    if found is None:
        return JsonResponse({"error": "no status record", "jid": jid}, status=404)
    shown = found.as_dict()
    shown.pop("errors")  # the tracebacks stay on the page
    return JsonResponse(shown, json_dumps_params={"default": str})
