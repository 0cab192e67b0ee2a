"""``WurkAdmin``: the ModelAdmin that mounts every Wurk page under its admin site."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed
from django.urls import URLPattern
from django.views.decorators.cache import never_cache

from ..admin_pages import pages
from ..redis.shards import via
from . import (
    builtin,  # noqa: F401  (registers the core pages)
    redis_down,
)
from .access import (  # noqa: F401  (kept importable from here)
    MANAGE_PERMISSION,
    TOKEN_ATTRIBUTE,
    VIEW_PERMISSION,
    authorize_hook,
    bearer_ok,
    can_manage,
    can_view,
    read_only,
)

View = Callable[..., HttpResponse]


def secure_headers(response: HttpResponse) -> HttpResponse:
    """No caching of job data anywhere, and no content sniffing (CORE-184)."""
    response["Cache-Control"] = "private, no-store"
    response["X-Content-Type-Options"] = "nosniff"
    return response


def _on_shard(request: HttpRequest, view: View, *args: Any, as_json: bool, **kwargs: Any) -> HttpResponse:
    """Run ``view`` (and render its template) on the shard the session selected, so
    every Redis read of the page goes there. Redis unreachable: a 503 saying so
    (:mod:`.redis_down`), a JSON one for an endpoint."""
    from .shard_select import selected

    shard = selected(request)
    model_admin = args[0]

    def run() -> HttpResponse:
        if shard is None:
            return view(request, *args, **kwargs)
        with via(shard):
            response = view(request, *args, **kwargs)
            if hasattr(response, "render") and not getattr(response, "is_rendered", True):
                response.render()  # a TemplateResponse renders lazily, after this block otherwise
            return response

    return redis_down.guarded(request, shard, run, model_admin=model_admin, as_json=as_json)


def _json_error(status: int, error: str) -> HttpResponse:
    return HttpResponse(json.dumps({"error": error}), status=status, content_type="application/json")


class ViewOnlyAdmin(admin.ModelAdmin):
    """What the admin index shows of a Wurk entry: visible to whoever may view the
    dashboard, never added, changed or deleted (there is no table behind it)."""

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return can_view(request)

    def has_module_permission(self, request: HttpRequest) -> bool:
        return can_view(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def get_model_perms(self, request: HttpRequest) -> dict[str, bool]:
        return {"add": False, "change": False, "delete": False, "view": can_view(request)}


class WurkAdmin(ViewOnlyAdmin):
    """Puts the dashboard, busy, queues, scheduled/retries/dead and metrics pages
    under ``<admin>/wurk_django/dashboard/``.

    GET needs ``wurk_django.view_dashboard``; POST also needs
    ``wurk_django.manage_jobs`` and ``WURK["ADMIN_READ_ONLY"]`` off. Every page
    goes through ``admin_site.admin_view`` (staff login, CSRF, never cached).
    """

    # -- pages ---------------------------------------------------------------------

    def wrap(self, view: View, *, methods: tuple[str, ...] = ("GET", "HEAD"), changes_jobs: bool = True) -> View:
        """Permission checks, then ``admin_site.admin_view`` around them. The view runs
        on the Redis shard chosen in the page's selector. ``changes_jobs=False``: a
        POST that only sets a view preference, allowed to viewers and in read-only
        mode."""
        site = self.admin_site

        @wraps(view)
        def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            request.current_app = site.name
            setattr(request, TOKEN_ATTRIBUTE, False)  # a page never takes the API token
            if request.method not in methods:
                return HttpResponseNotAllowed(methods)
            if not can_view(request):
                raise PermissionDenied("wurk_django.view_dashboard is needed to see the Wurk pages")
            if request.method not in ("GET", "HEAD") and changes_jobs:
                if read_only():
                    raise PermissionDenied("the Wurk dashboard is read-only (WURK['ADMIN_READ_ONLY'])")
                if not request.user.has_perm(MANAGE_PERMISSION):
                    raise PermissionDenied("wurk_django.manage_jobs is needed to change jobs")
            if not authorize_hook(request):
                raise PermissionDenied("refused by WURK['ADMIN_AUTHORIZE']")
            return secure_headers(_on_shard(request, view, self, *args, as_json=False, **kwargs))

        # What the view takes, for tests/admin/test_access_table.py's walk of every URL.
        checked.wurk_methods = methods  # type: ignore[attr-defined]
        checked.wurk_token = False  # type: ignore[attr-defined]
        checked.wurk_changes_jobs = changes_jobs  # type: ignore[attr-defined]
        return site.admin_view(checked)

    def api(self, view: View, *, token: bool = False) -> View:
        """A JSON/Prometheus endpoint (GET and HEAD): a staff session with the view
        permission, or with ``token=True`` also ``Authorization: Bearer
        <WURK["API_TOKEN"]>`` (DJ-056). Only the documented read-outs (stats,
        queue sizes, Prometheus) pass ``token=True``: the token is handed to
        scrapers, and job data (arguments, results, errors) must stay behind a
        login. ``ADMIN_AUTHORIZE`` is asked last, token requests included.
        No credential: 401; a staff user without the permission, or refused by
        the hook: 403."""
        site = self.admin_site

        @wraps(view)
        def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            request.current_app = site.name
            if request.method not in ("GET", "HEAD"):
                return HttpResponseNotAllowed(("GET", "HEAD"))
            by_token = token and bearer_ok(request)
            setattr(request, TOKEN_ATTRIBUTE, by_token)
            if not by_token:
                if not site.has_permission(request):  # no active staff session
                    response = _json_error(401, "unauthorized")
                    response["WWW-Authenticate"] = 'Bearer realm="wurk"'
                    return secure_headers(response)
                if not can_view(request):
                    return secure_headers(_json_error(403, "wurk_django.view_dashboard is needed"))
            if not authorize_hook(request):
                return secure_headers(_json_error(403, "refused by WURK['ADMIN_AUTHORIZE']"))
            return secure_headers(_on_shard(request, view, self, *args, as_json=True, **kwargs))

        checked.wurk_methods = ("GET", "HEAD")  # type: ignore[attr-defined]
        checked.wurk_token = token  # type: ignore[attr-defined]
        return never_cache(checked)

    #: ``methods`` for a page that also takes POST forms.
    POST = ("GET", "HEAD", "POST")

    def get_urls(self) -> list[URLPattern]:
        """Every registered page's URLs (:mod:`wurk_django.admin_pages`)."""
        return [pattern for page in pages() for pattern in page.urls(self)]
