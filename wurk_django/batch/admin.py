"""The Batches pages of the admin, and the JSON a progress page polls (PRO-262, PRO-360).

Lists are read in windows (a ``ZRANGE`` of one page, then one ``HGETALL`` per
row in a single round trip); a search reads the index newest first, a window
at a time, and stops once the page is full or :data:`SEARCH_LIMIT` batches were
looked at, so a huge index never costs one request the whole set.

On a Redis Cluster (issue 46 item 3) every key is named through the layout of the
pages' client (``{b:<bid>}``, the fleet's indexes ``{wurk}:batches``), and the retry and
dead sets a batch's failures are looked for in are every known queue's own.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlencode

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.utils.translation import gettext as _
from django.utils.translation import pgettext_lazy

from .. import payload
from ..admin.common import Page, each_row, keep_query, page_params, redis, render, short_args, url, when
from ..api.process import WorkSet
from ..api.record import JobRecord
from ..redis.cluster_layout import known_queues, layout_of
from ..workflow.flow import STEP_DONE
from .fire import CALLBACK_CLASS
from .status import BatchSet, DeadBatchSet, Status

SECTION = "batches"
SEARCH_LIMIT = 5000  # batches a search looks at, newest first
SEARCH_WINDOW = 500
DETAIL_ROWS = 100  # pending jids, children
FAILURE_ROWS = 50
SCAN_CALLS = 50  # ZSCAN calls over the retry/dead set per batch page...
SCAN_COUNT = 1000  # ...each looking at about this many members
QUEUE_SCAN = 10_000  # entries of the callback queue looked through for a callback job
BID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
#: How a batch's or a callback job's state reads on the page (``data-state`` keeps the name).
STATE_LABELS = {
    "expired": pgettext_lazy("batch state", "expired"),
    "invalidated": pgettext_lazy("batch state", "invalidated"),
    "dead": pgettext_lazy("batch state", "dead"),
    "success": pgettext_lazy("batch state", "success"),
    "complete": pgettext_lazy("batch state", "complete"),
    "running": pgettext_lazy("batch state", "running"),
    # A workflow step's batch before the workflow pushed the step's job: nothing ran, nothing is due.
    "not_started": pgettext_lazy("batch state", "not started"),
    "cancelled": pgettext_lazy("batch state", "cancelled"),
}
#: A workflow step's state that overrides its batch's (the batch reads "running" from creation).
STEP_STATES = {"waiting": "not_started", "cancelled": "cancelled"}
CALLBACK_STATE_LABELS = {
    "waiting": pgettext_lazy("callback job state", "waiting"),
    "fired": pgettext_lazy("callback job state", "fired"),
    "retrying": pgettext_lazy("callback job state", "retrying"),
    "dead": pgettext_lazy("callback job state", "dead"),
    "running": pgettext_lazy("callback job state", "running"),
    "queued": pgettext_lazy("callback job state", "queued"),
    "done": pgettext_lazy("callback job state", "done"),
    "done or queued": pgettext_lazy("callback job state", "done or queued"),
}


def workflow_step(status: Status) -> tuple[str, str] | None:
    """``(workflow id, step name)`` when ``status`` is a workflow step's batch (its success
    callback moves a workflow on), else ``None``."""
    for event, target, options in status.callbacks():
        if event == "success" and target == STEP_DONE and options.get("workflow") and options.get("step"):
            return str(options["workflow"]), str(options["step"])
    return None


def _row(status: Status) -> dict[str, Any]:
    total, pending = status.total, status.pending
    done = max(min(total - pending, total), 0)
    if not status.exists:
        state = "expired"  # still in the index (kept 30 days), its keys are gone
    elif status.invalidated:
        state = "invalidated"
    elif status.dead:
        state = "dead"
    elif status.success:
        state = "success"
    elif status.complete_at:
        state = "complete"
    else:
        state = "running"
    return {
        "bid": status.bid,
        "exists": status.exists,
        "description": status.description or "",
        "created": when(status.created_at),
        "total": total,
        "pending": pending,
        "failures": status.failures,
        "done": done,
        "percent": round(100 * done / total) if total else (100 if status.complete_at else 0),
        "state": state,
        "state_label": STATE_LABELS[state],
        "tags": status.tags,
        "parent_bid": status.parent_bid,
        **dict(zip(("workflow", "step"), workflow_step(status) or (None, None), strict=True)),
    }


def _step_states(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A workflow step's batch says its step has not started (or was cancelled) rather than
    "running 0%": the step's state read from its workflow, one round trip for the page."""
    steps = [row for row in rows if row.get("workflow") and not row.get("unreadable")]
    if not steps:
        return rows
    r = redis()
    pipe = r.pipeline(transaction=False)
    for row in steps:
        pipe.hget(layout_of(r).workflow(row["workflow"], "state"), row["step"])
    for row, state in zip(steps, pipe.execute(), strict=True):
        row["step_state"] = state.decode() if state else None
        if row["state"] == "running" and row["step_state"] in STEP_STATES:
            row["state"] = STEP_STATES[row["step_state"]]
            row["state_label"] = STATE_LABELS[row["state"]]
    return rows


def _statuses(bids: list[str]) -> list[Status]:
    r = redis()
    pipe = r.pipeline(transaction=False)
    for bid in bids:
        pipe.hgetall(layout_of(r).batch(bid))
    return [Status(bid, fields=fields) for bid, fields in zip(bids, pipe.execute(), strict=True)]


def _search(index: BatchSet, query: str, wanted: int, *, steps: bool = True) -> tuple[list[str], int, int]:
    """Bids whose bid or description contains ``query`` (newest first; every bid when it is
    empty), at most ``wanted``, leaving out workflow steps' batches unless ``steps``; how many
    batches were looked at; and how many steps' batches were left out among them."""
    needle = query.lower()
    found: list[str] = []
    looked = hidden = 0
    window = max(2 * wanted, 50)  # small first: a list with few step batches stays one cheap read
    r = redis()
    while looked < SEARCH_LIMIT and len(found) < wanted:
        bids = [b.decode() for b in r.zrange(index.key, looked, looked + window - 1, desc=True)]
        if not bids:
            break
        looked += len(bids)
        window = min(2 * window, SEARCH_WINDOW)
        pipe = r.pipeline(transaction=False)
        for bid in bids:
            pipe.hmget(layout_of(r).batch(bid), "description", "callbacks")
        for bid, (description, callbacks) in zip(bids, pipe.execute(), strict=True):
            if not steps and callbacks and STEP_DONE.encode() in callbacks:
                hidden += 1
                continue
            text = (description or b"").decode("utf-8", "replace").lower()
            if needle in bid.lower() or needle in text:
                found.append(bid)
    return found[:wanted], looked, hidden


def index(request: HttpRequest, model_admin: Any) -> HttpResponse:
    dead = request.GET.get("kind") == "dead"
    batch_index = DeadBatchSet() if dead else BatchSet()
    query = request.GET.get("q", "").strip()[:200]
    tag = request.GET.get("tag", "").strip()[:200]
    # Workflow steps' batches (one per step) would bury the batches people make: hidden
    # unless asked for, each still reached from its workflow's page.
    steps = request.GET.get("steps") == "1"
    number, count = page_params(request)
    start = (number - 1) * count
    looked = hidden = None
    if tag:
        members: list[str] = []
        for bid in batch_index.scan_tags(tag):
            members.append(bid)
            if len(members) >= SEARCH_LIMIT:
                break
        members.sort()
        total = int(redis().scard(layout_of(redis()).batch_tag(tag)))
        statuses = _statuses(members[start:start + count])
    elif query or not steps:
        found, searched, hidden = _search(batch_index, query, start + count + 1, steps=steps)
        looked = searched if query else None
        statuses = _statuses(found[start:start + count])
        total = len(found) if len(found) <= start + count else start + count + 1
    else:
        total = batch_index.size
        statuses = batch_index.page(start, count)
    rows = _step_states(each_row(statuses, _row, lambda status: layout_of(redis()).batch(status.bid)))
    page = Page(number=number, count=count, total=total, items=rows,
                base_query=keep_query(request, "q", "tag", "kind", "steps"))
    context = {"page": page, "query": query, "tag": tag, "dead": dead, "looked": looked,
               "search_limit": SEARCH_LIMIT, "index_size": batch_index.size, "steps": steps, "hidden": hidden,
               "steps_url": "?" + urlencode({**keep_query(request, "q", "tag", "kind"), "steps": "1"}),
               "no_steps_url": "?" + urlencode(keep_query(request, "q", "tag", "kind"))}
    return render(request, model_admin, "batches.html", context, section=SECTION,
                  title=_("Dead batches") if dead else _("Batches"))


def _entries(set_name: str, bid: str, jids: set[str]) -> tuple[list[dict[str, Any]], bool]:
    """Jobs of ``bid`` in the ``retry``/``dead`` set whose jid is in ``jids``, found by a
    ``ZSCAN`` matching the bid (a member names it in ``"bid"``, a callback job as its first
    argument); stops when all are found or :data:`SCAN_CALLS` calls were made (then the
    second value is False: the list may be incomplete). Arguments are shown as the other
    pages show them: an encrypted one masked."""
    found: list[dict[str, Any]] = []
    if not jids:
        return found, True
    r = redis()
    layout = layout_of(r)
    # One server: the one set. A cluster: every known queue's own, sharing the calls' budget.
    names = [getattr(layout, set_name)(q) for q in known_queues(r)] if layout.cluster else [set_name]
    calls = 0
    for name in names:
        cursor = 0
        while True:
            if calls >= SCAN_CALLS:
                return found[:FAILURE_ROWS], False
            calls += 1
            cursor, members = r.zscan(name, cursor, match=f'*"{bid}"*', count=SCAN_COUNT)
            _matching(members, jids, found)
            if len(found) >= min(len(jids), FAILURE_ROWS):
                return found[:FAILURE_ROWS], True
            if cursor == 0:
                break
    return found[:FAILURE_ROWS], True


def _matching(members: list[tuple[bytes, float]], jids: set[str], found: list[dict[str, Any]]) -> None:
    """Add the jobs among ``members`` (a ZSCAN's) whose jid is in ``jids`` to ``found``."""
    for value, score in members:
        try:
            job = payload.loads(value)
        except Exception:
            continue
        if isinstance(job, dict) and job.get("jid") in jids:
            found.append({"jid": job["jid"], "klass": job.get("display_class") or job.get("class"),
                          # Masked as on every other page: an encrypt job's secret never shows.
                          "args": short_args(JobRecord(job).display_args),
                          "error_class": job.get("error_class"),
                          "error_message": job.get("error_message"), "retry_count": job.get("retry_count"),
                          "at": when(score), "key": f"{payload.score(score)}-{job['jid']}"})


def detail(request: HttpRequest, model_admin: Any, bid: str) -> HttpResponse:
    if not BID.match(bid):
        raise Http404(_("no such batch"))
    status = Status(bid)
    if not status.exists:
        raise Http404(_("no such batch (never created, expired or deleted)"))
    if request.method == "POST":
        return _act(request, bid, status)
    failed = set(status.failed_jids)
    died = set(status.dead_jids)
    callbacks, callback_failures = _callbacks(status)
    children = _step_states([_row(s) for s in _statuses(status.children()[:DETAIL_ROWS])])
    retries, retries_complete = _entries("retry", bid, failed)
    dead_jobs, dead_complete = _entries("dead", bid, died)
    retries += callback_failures["retry"]
    dead_jobs += callback_failures["dead"]
    context = {
        "batch": _step_states([_row(status)])[0],
        "status": status,
        "created": when(status.created_at),
        "complete_at": when(status.complete_at),
        "success_at": when(status.success_at),
        "death_at": when(status.death_at),
        "pending_jids": status.pending_jids(DETAIL_ROWS),
        "failed_count": len(failed) + len(callback_failures["retry"]),
        "retries": retries,
        "dead_count": len(died) + len(callback_failures["dead"]),
        "dead_jobs": dead_jobs,
        "failures_complete": retries_complete and dead_complete,
        "children": children,
        "child_count": status.child_count,
        "callbacks": callbacks,
        "status_url": url(request, "wurk_batch_status", bid=bid),
        "state_labels": STATE_LABELS,
    }
    for row in callbacks:
        row["state_label"] = CALLBACK_STATE_LABELS.get(row["state"], row["state"])
    return render(request, model_admin, "batch.html", context, section=SECTION, title=_("Batch %(bid)s") % {"bid": bid})


def _callbacks(status: Status) -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
    """The callback rows, each with the state of the job its event pushed; and the callback
    jobs found in the retry and dead sets, for the Failures table.

    A fired callback's job is looked for where it can be: the retry and dead sets, the
    jobs running now, its queue (the first :data:`QUEUE_SCAN` entries). Found nowhere, it
    ran to its end: ``done``.
    """
    bid = status.bid
    fired = {"complete": status.complete_at, "success": status.success_at, "death": status.death_at}
    rows: list[dict[str, Any]] = []
    for event in ("complete", "success", "death"):
        entries = [(target, options) for kind, target, options in status.callbacks() if kind == event]
        jids = status.callback_jids(event)
        for index, (target, options) in enumerate(entries):
            rows.append({"event": event, "target": target, "options": short_args([options]) if options else "",
                         "fired_at": when(fired[event]), "jid": jids[index] if index < len(jids) else None,
                         "state": "waiting" if not fired[event] else "fired", "error": None, "key": None})
    by_jid = {row["jid"]: row for row in rows if row["jid"]}
    failures: dict[str, list[dict[str, Any]]] = {"retry": [], "dead": []}
    if not by_jid:
        return rows, failures
    left = set(by_jid)
    for set_name, state in (("retry", "retrying"), ("dead", "dead")):
        found, _complete = _entries(set_name, bid, left)
        for job in found:
            if job["klass"] != CALLBACK_CLASS:
                continue
            row = by_jid[job["jid"]]
            row.update(state=state, error=f"{job['error_class']}: {job['error_message']}", key=job["key"],
                       retry_count=job["retry_count"], at=job["at"], kind="retries" if set_name == "retry" else "dead")
            failures[set_name].append({**job, "klass": f"{CALLBACK_CLASS} ({row['event']} → {row['target']})"})
            left.discard(job["jid"])
    if left:
        for _identity, _tid, work in WorkSet(redis()):
            if work.job.jid in left:
                by_jid[work.job.jid]["state"] = "running"
                left.discard(work.job.jid)
    if left:
        r = redis()
        queue = layout_of(r).queue(status.callback_queue or "default")
        length = int(r.llen(queue))
        for start in range(0, min(length, QUEUE_SCAN), SCAN_COUNT):
            for raw in r.lrange(queue, start, start + SCAN_COUNT - 1):
                for jid in [jid for jid in left if jid.encode() in raw]:
                    by_jid[jid]["state"] = "queued"
                    left.discard(jid)
            if not left:
                break
        for jid in left:
            # Nowhere to be found: it ran to its end (or, past the part of a long queue
            # looked through, may still wait there).
            by_jid[jid]["state"] = "done" if length <= QUEUE_SCAN else "done or queued"
    return rows, failures


def _act(request: HttpRequest, bid: str, status: Status) -> HttpResponse:
    from .batch import Batch

    action = request.POST.get("action")
    if action == "invalidate":
        Batch(bid).invalidate_all()
        messages.success(request, _("Batch %(bid)s and the batches under it were invalidated: their queued jobs "
                                    "will be skipped.") % {"bid": bid})
        return HttpResponseRedirect(url(request, "wurk_batch", bid=bid))
    if action == "delete":
        status.delete()
        messages.success(request, _("Batch %(bid)s was deleted.") % {"bid": bid})
        return HttpResponseRedirect(url(request, "wurk_batches"))
    messages.error(request, _("Unknown action %(action)r.") % {"action": action})
    return HttpResponseRedirect(url(request, "wurk_batch", bid=bid))


def status_json(request: HttpRequest, model_admin: Any, bid: str) -> HttpResponse:
    """``Status.data()`` of one batch, for a page polling its progress; 404 when there is none."""
    status = Status(bid) if BID.match(bid) else None
    if status is None or not status.exists:
        return JsonResponse({"error": "no such batch", "bid": bid}, status=404)
    return JsonResponse(status.data())


def list_json(request: HttpRequest, model_admin: Any) -> HttpResponse:
    """One page of the newest batches (``?page=&count=``)."""
    number, count = page_params(request)
    index_set = DeadBatchSet() if request.GET.get("kind") == "dead" else BatchSet()
    rows = [s.data() for s in index_set.page((number - 1) * count, count)]
    return JsonResponse({"size": index_set.size, "page": number, "count": count, "batches": rows})


def _urls(admin: Any) -> list:
    from django.urls import path

    return [
        path("batches/", admin.wrap(index), name="wurk_batches"),
        path("batches.json", admin.api(list_json), name="wurk_batches_json"),
        path("batches/<str:bid>/", admin.wrap(detail, methods=admin.POST), name="wurk_batch"),
        path("batches/<str:bid>.json", admin.api(status_json), name="wurk_batch_status"),
    ]
