"""The admin's Limits page: every limiter in use, how full it is, and a Reset button."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils.translation import gettext as _

from ..admin.common import Page, keep_query, page_params, redirect_back, render, url, when
from ..redis.cluster_layout import layout_of
from ..text import to_text
from . import listing
from .base import redis_client
from .concurrent_limiter import COUNTERS
from .options import NAME

logger = logging.getLogger("wurk_django.limiter")


def _row(name: str, meta: dict[str, str] | None) -> dict[str, Any]:
    row: dict[str, Any] = {"name": name, "type": (meta or {}).get("type", "?"), "options": (meta or {}).get("options", "")}
    lim = listing.build(name, meta["type"], meta["options"]) if meta else None
    if lim is None:
        row["error"] = _("unreadable metadata") if meta else _("metadata expired")
        return row
    try:
        status = lim.status()
    except Exception as exc:  # one odd limiter must not take the page down
        logger.warning("status of limiter %r failed: %s", name, exc)
        row["error"] = _("status unavailable (%(error)s)") % {"error": exc.__class__.__name__}
        return row
    used, limit = status["used"], status["limit"]
    row.update(used=used, limit=limit, available=status["available"], reset_at=when(status["reset_at"]),
               percent=min(100, round(100 * used / limit)) if limit else 0)
    if lim.type == "concurrent":
        row["counters"] = [(field, status[field]) for field in COUNTERS]
    return row


def _metadata(names: list[str]) -> list[dict[str, str] | None]:
    client = redis_client()
    where = layout_of(client)
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.hgetall(where.limiter_meta(name))
    return [{to_text(k): to_text(v) for k, v in found.items()} or None for found in pipe.execute()]


def index(request: HttpRequest, model_admin: Any) -> HttpResponse:
    if request.method == "POST":
        return _reset(request)
    query = request.GET.get("q", "").strip()
    number, count = page_params(request)
    names = listing.names()
    if query:
        needle = query.casefold()
        names = [n for n in names if needle in n.casefold()]
    window = names[(number - 1) * count:number * count]
    rows = [_row(name, meta) for name, meta in zip(window, _metadata(window), strict=True)]
    page = Page(number=number, count=count, total=len(names), items=rows, base_query=keep_query(request, "q"))
    return render(request, model_admin, "limits.html", {"page": page, "query": query, "counters": COUNTERS},
                  section="limits", title=_("Limits"))


def _reset(request: HttpRequest) -> HttpResponse:
    name = request.POST.get("name", "")
    back = url(request, "wurk_limits")
    if request.POST.get("action") != "reset" or not NAME.fullmatch(name):
        messages.error(request, _("Unknown action or limiter name."))
        return redirect_back(request, back)
    if listing.reset(name):
        messages.success(request, _("Limiter %(name)s reset: its counters start from zero.") % {"name": name})
    else:
        messages.info(request, _("Limiter %(name)s has no metadata any more; any state it left was deleted.")
                      % {"name": name})
    return redirect_back(request, back)


def urls(model_admin: Any) -> list:
    return [path("limits/", model_admin.wrap(index, methods=model_admin.POST), name="wurk_limits")]
