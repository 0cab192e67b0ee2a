"""The Tasks page: results of ``django.tasks`` tasks run by wurk (``status:<id>`` hashes).

A list (task, status, enqueued/started/finished, return value or error) and
one result in full, with a link to where its job is now.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from ..results import store
from ..tasks import results
from ..tasks.results import STATUS_OF
from .common import Page, call_text, each_row, keep_query, page_params, redis, render, servers, url

#: At most this many results are read to sort a listing; older ones are still
#: reachable by id (the search box, or a job's link).
SCAN_LIMIT = 5000
VALUE_LIMIT = 120
_TIMES = ("enqueued_at", "started_at", "finished_at")
#: What a status reads as on the page; the filter and ``data-status`` keep the names.
STATUS_LABELS = {
    "READY": pgettext_lazy("task status", "READY"),
    "RUNNING": pgettext_lazy("task status", "RUNNING"),
    "SUCCESSFUL": pgettext_lazy("task status", "SUCCESSFUL"),
    "FAILED": pgettext_lazy("task status", "FAILED"),
    "UNKNOWN": pgettext_lazy("task status", "UNKNOWN"),
}


def _scan_ids(client: Any, limit: int = SCAN_LIMIT) -> list[str]:
    """The ids of the result records, up to ``limit``: a ``SCAN`` of the one server, or on a
    Redis Cluster of each primary in turn (issue 46 item 3: a record ``status:<id>`` is a key
    of its own, spread over the primaries by its name)."""
    ids = []
    for server in servers(client):
        for raw_key in server.scan_iter(match=store.PATTERN, count=500):
            text = raw_key.decode() if isinstance(raw_key, bytes) else raw_key
            jid = text[len(store.PREFIX):]
            if results.valid_id(jid):
                ids.append(jid)
                if len(ids) >= limit:
                    return ids
    return ids


def status_name(state: str | None) -> str:
    status = STATUS_OF.get(state or "")
    return str(status.name if hasattr(status, "name") else status or "UNKNOWN")


def _short(value: Any, limit: int = VALUE_LIMIT) -> str:
    try:
        text = json.dumps(value, default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def row(jid: str, fields: dict[str, Any]) -> dict[str, Any]:
    errors = fields.get("errors") or []
    last_error = errors[-1] if errors and isinstance(errors[-1], dict) else None
    name = str(fields.get("class") or "?")
    args = fields.get("args") if isinstance(fields.get("args"), list) else []
    kwargs = fields.get("kwargs") if isinstance(fields.get("kwargs"), dict) else {}
    return {
        "id": jid,
        "task": name,
        "call": call_text(name.rsplit(".", 1)[-1], args, kwargs),
        "state": fields.get("state") or "",
        "status": status_name(fields.get("state")),
        "status_label": STATUS_LABELS.get(status_name(fields.get("state")), status_name(fields.get("state"))),
        **{name: results.to_datetime(fields.get(name)) for name in _TIMES},
        "return_value": _short(fields["return_value"]) if "return_value" in fields else None,
        "error": (last_error.get("exception_class_path") or "error") if last_error else None,
        "attempts": len(fields.get("worker_ids") or []),
    }


def index(request: HttpRequest, model_admin: Any) -> HttpResponse:
    client = redis()  # on a Redis Cluster its RedisCluster: the pipelines below reach every primary
    wanted_status = request.GET.get("status", "").upper()
    search = request.GET.get("q", "").strip()
    number, count = page_params(request)
    if results.valid_id(search):
        ids = [search]
    else:
        ids = _scan_ids(client)
    pipe = client.pipeline(transaction=False)
    for jid in ids:
        pipe.hmget(results.key(jid), "state", "class", "enqueued_at")
    heads = pipe.execute() if ids else []
    listed = []
    for jid, (state, klass, enqueued) in zip(ids, heads, strict=True):
        if state is None and klass is None:
            continue  # expired between SCAN and HMGET
        state_text = state.decode() if isinstance(state, bytes) else state
        if wanted_status and status_name(state_text) != wanted_status:
            continue
        name = klass.decode() if isinstance(klass, bytes) else (klass or "")
        if search and not results.valid_id(search) and search.lower() not in name.lower():
            continue
        try:
            at = int(enqueued or 0)
        except ValueError:
            at = 0  # not a time: listed last, and shown as unreadable below
        listed.append((at, jid))
    listed.sort(reverse=True)  # newest first
    window = listed[(number - 1) * count: number * count]
    pipe = client.pipeline(transaction=False)
    for _at, jid in window:
        pipe.hgetall(results.key(jid))
    fetched = [(jid, raw) for (_at, jid), raw in zip(window, pipe.execute() if window else [], strict=True) if raw]
    rows = each_row(fetched, lambda pair: row(pair[0], results.decode(pair[1])), lambda pair: results.key(pair[0]))
    page = Page(number=number, count=count, total=len(listed), items=rows,
                base_query=keep_query(request, "status", "q"))
    context = {
        "page": page,
        "status_choices": [("", _("Any status"))] + [(s, STATUS_LABELS[s]) for s in
                                                      ("READY", "RUNNING", "SUCCESSFUL", "FAILED")],
        "wanted_status": wanted_status,
        "search": search,
        "truncated": len(ids) >= SCAN_LIMIT,
    }
    return render(request, model_admin, "tasks.html", context, section="tasks", title=_("Tasks"))


def where_is_job(request: HttpRequest, jid: str, state: str) -> tuple[str, str] | None:
    """A link to the job behind a result while it still waits somewhere."""
    if state == "retrying":
        return _("In the retry set"), url(request, "wurk_set", kind="retries") + f"?substr={jid}"
    if state == "scheduled":
        return _("In the scheduled set"), url(request, "wurk_set", kind="scheduled") + f"?substr={jid}"
    if state == "dead":
        return _("In the dead set"), url(request, "wurk_set", kind="dead") + f"?substr={jid}"
    return None


def detail(request: HttpRequest, model_admin: Any, result_id: str) -> HttpResponse:
    if not results.valid_id(result_id):
        raise Http404(_("not a task result id"))
    fields = results.read(redis(), result_id)
    if fields is None:
        return render(request, model_admin, "task.html", {"missing": True, "result_id": result_id},
                      section="tasks", title=_("Task result not found"), status=404)
    summary = row(result_id, fields)
    errors = [e for e in (fields.get("errors") or []) if isinstance(e, dict)]
    context = {
        "result": summary,
        "result_id": result_id,
        "fields": fields,
        "task_options": json.dumps(fields.get("task") or {}, indent=2, default=repr),
        "return_value": json.dumps(fields["return_value"], indent=2, default=repr) if "return_value" in fields else None,
        "errors": errors,
        "last_attempted_at": results.to_datetime(fields.get("last_attempted_at")),
        "job_link": where_is_job(request, result_id, summary["state"]),
        "back": url(request, "wurk_tasks"),
    }
    title = _("Task %(name)s") % {"name": summary["task"]}
    return render(request, model_admin, "task.html", context, section="tasks", title=title)
