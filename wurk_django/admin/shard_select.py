"""The Redis shard the dashboard shows (Sidekiq Pro's multi-shard Web UI).

With ``WURK["SHARDS"]`` set, every page carries a selector; the choice is kept
in the session, and :meth:`WurkAdmin.wrap`/``api`` run each request inside
``wurk_django.via(<choice>)``, so every Redis read and action of the page goes
to that shard (:func:`selected`).
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, HttpResponse

from ..conf import base_config
from ..redis import shards
from .common import redirect_back, url

SESSION_KEY = "wurk_shard"


def selected(request: HttpRequest) -> str | None:
    """The shard this request reads, or ``None`` for the default Redis (also when
    no shards are configured, or the session names one that no longer exists)."""
    session = getattr(request, "session", None)
    if session is None:
        return None
    name = session.get(SESSION_KEY)
    if not name or name == "default":
        return None
    return name if name in base_config().shards else None


def context(request: HttpRequest) -> dict[str, Any]:
    """The selector's template context: empty without shards."""
    names = shards.names()
    if len(names) < 2:
        return {}
    return {"wurk_shards": names, "wurk_shard": selected(request) or "default",
            "wurk_shard_url": url(request, "wurk_shard")}


def select(request: HttpRequest, model_admin: Any) -> HttpResponse:
    """POST ``shard``: show that shard from now on (a view preference, not a change)."""
    name = request.POST.get("shard", "")
    if name in shards.names() and hasattr(request, "session"):
        request.session[SESSION_KEY] = name
    return redirect_back(request, url(request, "wurk_django_dashboard_changelist"))
