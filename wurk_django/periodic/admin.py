"""The admin's Periodic page: every loop, its next and last run, pause/unpause, enqueue now, history."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.urls import path
from django.utils.translation import gettext as _

from ..admin.common import redirect_back, redis, render, url
from ..leader import leader_info
from . import loops as store
from .loops import Loop, LoopSet
from .poller import enqueue_now

ACTIONS = ("pause", "unpause", "enqueue")
HEX = set("0123456789abcdef")


def _row(loop: Loop, now: float) -> dict[str, Any]:
    upcoming = None
    if not loop.paused:
        # The stored mark when there is one (what the poller will use), else from the schedule.
        upcoming = loop.next_fire if loop.next_fire is not None else _safe_next(loop, now)
    return {
        "lid": loop.lid,
        "schedule": loop.schedule,
        "words": loop.describe(),
        "klass": loop.klass,
        "queue": loop.queue,
        "args": loop.args,
        "label": loop.label,
        "tz": loop.tz or "UTC",
        "paused": loop.paused,
        "last": loop.local(loop.last_fire),
        "next": loop.local(upcoming),
    }


def _safe_next(loop: Loop, now: float) -> int | None:
    try:
        return loop.next_fire_at(now)
    except ValueError:
        return None


def _leader() -> dict[str, Any]:
    info = leader_info(redis())
    since = info["since"]
    return {**info, "since": datetime.fromtimestamp(since, UTC) if since else None}


def _act(request: HttpRequest) -> None:
    action = request.POST.get("action")
    lid = request.POST.get("lid", "")
    if action not in ACTIONS:
        messages.error(request, _("Unknown action."))
        return
    # The pages' client: on a Redis Cluster the RedisCluster, the loops' keys {loop:<lid>} (issue 46 item 3).
    if action == "enqueue":
        jid = enqueue_now(lid, redis=redis()) if _is_lid(lid) else None
        if jid is None:
            messages.error(request, _("No periodic job %(lid)s.") % {"lid": lid})
        else:
            messages.success(request, _("Enqueued %(lid)s now as %(jid)s.") % {"lid": lid, "jid": jid})
        return
    if not (_is_lid(lid) and store.set_paused(lid, action == "pause", redis())):
        messages.error(request, _("No periodic job %(lid)s.") % {"lid": lid})
        return
    text = _("Paused %(lid)s.") if action == "pause" else _("Unpaused %(lid)s.")
    messages.success(request, text % {"lid": lid})


def _is_lid(lid: str) -> bool:
    return len(lid) == 16 and set(lid) <= HEX


def index(request: HttpRequest, model_admin: Any) -> HttpResponse:
    if request.method == "POST":
        _act(request)
        return redirect_back(request, url(request, "wurk_periodic"))
    now = time.time()
    rows = sorted((_row(loop, now) for loop in LoopSet(redis())), key=lambda r: (r["klass"], r["schedule"], r["lid"]))
    return render(request, model_admin, "periodic.html", {"loops": rows, "leader": _leader()},
                  section="periodic", title=_("Periodic"))


def detail(request: HttpRequest, model_admin: Any, lid: str) -> HttpResponse:
    loop = LoopSet(redis()).fetch(lid) if _is_lid(lid) else None
    if loop is None:
        raise Http404(_("no such periodic job"))
    if request.method == "POST":
        _act(request)
        return redirect_back(request, url(request, "wurk_periodic_loop", lid=lid))
    history = [{"at": loop.local(at), "jid": jid} for at, jid in loop.history(redis())]
    return render(request, model_admin, "periodic_loop.html",
                  {"loop": _row(loop, time.time()), "history": history, "leader": _leader()},
                  section="periodic", title=_("Periodic %(lid)s") % {"lid": lid})


def urls(admin: Any) -> list:
    return [
        path("periodic/", admin.wrap(index, methods=admin.POST), name="wurk_periodic"),
        path("periodic/<str:lid>/", admin.wrap(detail, methods=admin.POST), name="wurk_periodic_loop"),
    ]
