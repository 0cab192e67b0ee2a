"""The Workflows pages of the admin: the list, one workflow as a picture and a table,
its JSON, and the retry / cancel buttons (on a Redis Cluster too: the handles read the
cluster layout, issue 46 item 3)."""

from __future__ import annotations

import re
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.utils.translation import gettext as _

from ..admin.common import Page, each_row, page_params, redis, render, short_args, url, when
from ..redis.cluster_layout import layout_of
from . import graph, keys
from .errors import CannotRetry
from .status import Workflow, WorkflowSet

SECTION = "workflows"
WID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
RESULT_SHOWN = 300  # characters of a result shown in the table


def index(request: HttpRequest, model_admin: Any) -> HttpResponse:
    number, count = page_params(request)
    workflows = WorkflowSet()
    # The key a row names is in the layout of the pages' Redis ({wf:<id>} on a Redis Cluster).
    layout = layout_of(redis())
    rows = each_row(workflows.summaries((number - 1) * count, count), _list_row,
                    lambda row: keys.workflow(row["id"], layout=layout))
    page = Page(number=number, count=count, total=len(workflows), items=rows)
    return render(request, model_admin, "workflows.html", {"page": page}, section=SECTION, title=_("Workflows"))


def _list_row(row: dict[str, Any]) -> dict[str, Any]:
    if row.get("unreadable"):
        return row
    row["created"] = when(row["created_at"])  # a time in ms (not s) is out of range: unreadable
    row["percent"] = round(100 * row["succeeded"] / row["total"]) if row["total"] else 0
    row["state_label"] = graph.state_label(row["state"]) if row["state"] != "expired" else _("expired")
    return row


def _workflow(wid: str) -> Workflow:
    workflow = Workflow(wid) if WID.match(wid) else None
    if workflow is None or not workflow.exists:
        raise Http404(_("no such workflow (never created, expired or deleted)"))
    return workflow


def detail(request: HttpRequest, model_admin: Any, wid: str) -> HttpResponse:
    workflow = _workflow(wid)
    if request.method == "POST":
        return _act(request, workflow)
    data = workflow.data()
    steps = workflow.steps()
    rows = []
    for step in steps:
        result = short_args([step.result], RESULT_SHOWN) if step.has_result else ""
        rows.append({"step": step, "state_label": graph.state_label(step.state), "result": result,
                     "args": short_args(step.args), "kwargs": step.kwargs})
    context = {
        "workflow": data,
        "state_label": graph.state_label(data["state"]) if data["state"] != "running" else _("running"),
        "created": when(data["created_at"]),
        "finished": when(data["finished_at"]),
        "picture": graph.draw(steps),
        "rows": rows,
        "failed_steps": [s.name for s in steps if s.state == "failed"],
        "can_cancel": data["state"] in ("running", "failed"),
        "json_url": url(request, "wurk_workflow_json", wid=wid),
    }
    return render(request, model_admin, "workflow.html", context, section=SECTION,
                  title=_("Workflow %(id)s") % {"id": wid})


def _act(request: HttpRequest, workflow: Workflow) -> HttpResponse:
    action = request.POST.get("action")
    back = HttpResponseRedirect(url(request, "wurk_workflow", wid=workflow.id))
    if action == "retry":
        step = request.POST.get("step") or None
        try:
            retried = workflow.retry(step)
        except CannotRetry as exc:
            messages.error(request, str(exc))
            return back
        if retried:
            messages.success(request, _("Retrying %(steps)s: the workflow goes on once it succeeds.")
                             % {"steps": ", ".join(retried)})
        else:
            messages.info(request, _("No failed step to retry."))
        return back
    if action == "cancel":
        if workflow.cancel():
            messages.success(request, _("Workflow %(id)s was cancelled: no more steps will start.")
                             % {"id": workflow.id})
        else:
            messages.info(request, _("Workflow %(id)s had already finished.") % {"id": workflow.id})
        return back
    messages.error(request, _("Unknown action %(action)r.") % {"action": action})
    return back


def workflow_json(request: HttpRequest, model_admin: Any, wid: str) -> HttpResponse:
    """``Workflow.data()``: the workflow, its steps, their states, results and errors."""
    workflow = Workflow(wid) if WID.match(wid) else None
    if workflow is None or not workflow.exists:
        return JsonResponse({"error": "no such workflow", "id": wid}, status=404)
    return JsonResponse(workflow.data())


def list_json(request: HttpRequest, model_admin: Any) -> HttpResponse:
    """One page of the newest workflows (``?page=&count=``), without their steps."""
    number, count = page_params(request)
    workflows = WorkflowSet()
    return JsonResponse({"size": len(workflows), "page": number, "count": count,
                         "workflows": workflows.summaries((number - 1) * count, count)})


def urls(admin: Any) -> list:
    from django.urls import path

    return [
        path("workflows/", admin.wrap(index), name="wurk_workflows"),
        path("workflows.json", admin.api(list_json), name="wurk_workflows_json"),
        path("workflows/<str:wid>/", admin.wrap(detail, methods=admin.POST), name="wurk_workflow"),
        path("workflows/<str:wid>.json", admin.api(workflow_json), name="wurk_workflow_json"),
    ]
