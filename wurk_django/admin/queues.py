"""Queues list and one queue's jobs, page by page (CORE-163, CORE-193, CORE-194)."""

from __future__ import annotations

import hashlib
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.translation import gettext as _

from .. import context, pause
from ..api import JobRecord, Queue, Stats
from ..api.revoke import QUEUED, revoke
from ..conf import is_queue_name
from ..queue_limits import caps as queue_caps
from .common import Page, args_text, is_task, keep_query, page_params, redirect_back, redis, render, url


def set_paused(name: str, paused: bool) -> None:
    """Pause or unpause ``name``: ``SADD``/``SREM paused <name>`` (CORE-062, CORE-256).

    Through :mod:`wurk_django.pause` so fetchers in this process drop their cache at once.
    """
    if paused:
        pause.pause(name)
    else:
        pause.unpause(name)


def _queue(name: str) -> Queue:
    if not is_queue_name(name):
        # Only a control character makes a name one no client can push to; any other name
        # Sidekiq accepts opens, unlike Sidekiq's Web UI (CORE-183; see docs/admin.md).
        raise Http404(_("no such queue"))
    return Queue(name)


def index(request: HttpRequest, model_admin: Any) -> HttpResponse:
    stats = Stats()
    rows = stats.queue_summaries()
    unserved = {row.name for row in stats.unserved_queues(rows)}
    limits = queue_limits(rows)
    return render(request, model_admin, "queues.html",
                  {"stats": stats, "queues": rows, "unserved": unserved, "limits": limits,
                   "rows": [(row, limits.get(row.name)) for row in rows]},
                  section="queues", title=_("Queues"))


def queue_limits(rows: list[Any]) -> dict[str, dict[str, int]]:
    """``{queue: {"limit": n, "running": k}}`` for the listed queues that ``QUEUE_LIMITS``
    caps (issue 47 item 4), in one round trip; empty, and no Redis call, without limits."""
    limits = context.config().queue_limits
    if not limits:
        return {}
    names = [row.name for row in rows if row.name in limits]
    running = queue_caps.in_use(redis(), names)
    return {name: {"limit": limits[name], "running": running.get(name, 0)} for name in names}


def read_page(queue: Queue, number: int, count: int, *, oldest_first: bool) -> tuple[int, list[JobRecord]]:
    """``(size, jobs)`` for one page: one ``LLEN`` and one ``LRANGE`` window, however long the queue."""
    r = redis()
    pipe = r.pipeline(transaction=False)
    pipe.llen(queue.rname)
    start = (number - 1) * count
    if oldest_first:
        # The oldest job is at the right end: count windows from there.
        pipe.lrange(queue.rname, -(start + count), -(start + 1))
    else:
        pipe.lrange(queue.rname, start, start + count - 1)
    size, values = pipe.execute()
    if oldest_first:
        values = list(reversed(values))
    return int(size), [JobRecord(v, queue.name) for v in values]


def detail(request: HttpRequest, model_admin: Any, name: str) -> HttpResponse:
    queue = _queue(name)
    number, count = page_params(request)
    oldest_first = request.GET.get("direction") == "asc"
    size, records = read_page(queue, number, count, oldest_first=oldest_first)
    start = (number - 1) * count
    jobs = [{
        # Where the row sits in the list (from the right end for the oldest-first view),
        # so a delete looks for it there and never reads the whole queue.
        "index": -(start + i + 1) if oldest_first else start + i,
        "klass": r.display_class,
        "args": args_text(r),
        "task": is_task(r),
        "jid": r.jid,
        "enqueued_at": r.enqueued_at,
        # The Delete form names the job by a digest of its stored bytes, never the bytes:
        # they may hold an argument the page itself masks (ENT-610).
        "digest": hashlib.sha256(r.value).hexdigest(),
        "unreadable": r.parse_error,
    } for i, r in enumerate(records)]
    page = Page(number=number, count=count, total=size, items=jobs, base_query=keep_query(request, "direction"))
    context = {
        "queue": queue,
        "paused": queue.paused,
        "latency": queue.latency,
        "page": page,
        "oldest_first": oldest_first,
    }
    title = _("Queue %(name)s") % {"name": queue.name}
    return render(request, model_admin, "queue.html", context, section="queues", title=title)


def action(request: HttpRequest, model_admin: Any, name: str) -> HttpResponse:
    """``clear``, ``pause`` or ``unpause`` one queue."""
    queue = _queue(name)
    what = request.POST.get("action")
    if what == "clear":
        queue.clear()
        messages.success(request, _("Queue %(name)s cleared.") % {"name": queue.name})
        return redirect_back(request, url(request, "wurk_queues"))
    if what == "cancel":
        jid = request.POST.get("jid", "")
        if jid.strip() and revoke(jid, by=request.user.get_username() or None) == QUEUED:
            messages.success(request, _("Job %(jid)s cancelled: it is in the dead set.") % {"jid": jid})
        else:
            messages.warning(request, _("That job is no longer in a queue."))
        return redirect_back(request, url(request, "wurk_queue", name=queue.name))
    if what in ("pause", "unpause"):
        set_paused(queue.name, what == "pause")
        text = (_("Queue %(name)s paused: workers stop fetching within a few seconds.") if what == "pause"
                else _("Queue %(name)s unpaused: workers resume fetching within a few seconds."))
        messages.success(request, text % {"name": queue.name})
    else:
        messages.error(request, _("Unknown action."))
    return redirect_back(request, url(request, "wurk_queues"))


#: Entries either side of a row's position searched for it when deleting it: the list may
#: have moved a little since the page was drawn.
SLACK = 200
#: Entries read per round trip while searching, and the most read for one delete.
WINDOW = 500
REACH = 5000


def locate(queue: Queue, digest: str, index: int, size_then: int) -> tuple[int, bytes] | None:
    """``(position from the left, stored bytes)`` of the job whose SHA-256 is ``digest``,
    searched near where its page showed it (``index``, negative when counted from the
    right), or ``None``.

    Pushes land on the left and move a newest-first row right; fetches take from the
    right and move an oldest-first row toward it. The net growth since the page was
    drawn says how far at least, and the search reads a bounded window however long
    the queue is.
    """
    r = redis()
    size_now = int(r.llen(queue.rname))
    drift = size_now - size_then
    if index >= 0:
        low, high = index - SLACK, index + max(drift, 0) + SLACK
    else:
        low, high = size_now + index - SLACK, size_now + index + max(-drift, 0) + SLACK
    low, high = max(low, 0), min(high, size_now - 1, max(low, 0) + REACH - 1)
    for start in range(low, high + 1, WINDOW):
        values = r.lrange(queue.rname, start, min(start + WINDOW - 1, high))
        for offset, value in enumerate(values):
            if hashlib.sha256(value).hexdigest() == digest:
                return start + offset, value
    return None


def _delete_near(queue: Queue, digest: str, index: int, size_then: int) -> bool:
    for _attempt in range(2):  # the list may move between the read and the delete: look again once
        found = locate(queue, digest, index, size_then)
        if found is None:
            return False
        if queue.delete_at(*found):
            return True
    return False


def _int(text: str) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def find_by_digest(queue: Queue, digest: str, chunk: int = 1000) -> bytes | None:
    """The stored bytes of the job whose SHA-256 is ``digest``, walking the list a window at a time."""
    r = redis()
    start = 0
    while True:
        values = r.lrange(queue.rname, start, start + chunk - 1)
        for value in values:
            if hashlib.sha256(value).hexdigest() == digest:
                return value
        if len(values) < chunk:
            return None
        start += chunk


def delete_job(request: HttpRequest, model_admin: Any, name: str) -> HttpResponse:
    """Remove one job, named by the SHA-256 of its stored bytes and found near the
    position its page showed (CORE-004, CORE-194). ``key_val`` (the exact stored text,
    Sidekiq's form field) is accepted too."""
    queue = _queue(name)
    digest = request.POST.get("digest", "")
    raw: bytes | None = request.POST.get("key_val", "").encode("utf-8") or None
    index, size_then = _int(request.POST.get("index", "")), _int(request.POST.get("size", ""))
    if digest and raw is None and index is not None and size_then is not None:
        deleted = _delete_near(queue, digest, index, size_then)
    else:
        if digest and raw is None:
            raw = find_by_digest(queue, digest)  # a form without the row's position: walk the list
        deleted = bool(raw and queue.delete_job(raw))
    if deleted:
        messages.success(request, _("Job deleted."))
    else:
        messages.warning(request, _("That job is no longer in the queue."))
    return redirect_back(request, url(request, "wurk_queue", name=queue.name))
