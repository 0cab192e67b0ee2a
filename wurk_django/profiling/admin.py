"""The Profiles admin page: stored job profiles (from wurk or Ruby Sidekiq workers)."""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, HttpResponse
from django.urls import path
from django.utils.translation import gettext as _

from ..api import ProfileSet
from .gecko import load, top_functions


def urls(model_admin: Any) -> list:
    return [
        path("profiles/", model_admin.wrap(index), name="wurk_profiles"),
        path("profiles/<str:key>/", model_admin.wrap(detail), name="wurk_profile"),
        path("profiles/<str:key>/data", model_admin.wrap(download), name="wurk_profile_data"),
    ]


def index(request: HttpRequest, model_admin: Any) -> HttpResponse:
    from ..admin.common import render

    return render(request, model_admin, "profiles.html", {"profiles": list(ProfileSet())},
                  section="profiles", title=_("Profiles"))


def _record(key: str):
    record = ProfileSet().find(key)
    if record is None:
        raise Http404(_("no such profile (it may have expired)"))
    return record


def detail(request: HttpRequest, model_admin: Any, key: str) -> HttpResponse:
    from ..admin.common import render

    record = _record(key)
    data = record.data
    summary, problem = None, None
    try:
        summary = top_functions(load(data or b""), limit=60)
    except ValueError as exc:
        problem = str(exc)
    return render(request, model_admin, "profile.html", {"profile": record, "summary": summary, "problem": problem},
                  section="profiles", title=_("Profile %(key)s") % {"key": key})


def download(request: HttpRequest, model_admin: Any, key: str) -> HttpResponse:
    record = _record(key)
    data = record.data or b""
    filename = (record.token or "profile") + "-" + (record.jid or "") + ".json.gz"
    response = HttpResponse(data, content_type="application/gzip")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
