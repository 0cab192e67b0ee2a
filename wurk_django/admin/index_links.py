"""The admin index's "Wurk" section: one entry per page, not only "Dashboard".

Django's admin index lists registered models, so each page has a proxy model
(``models.PAGE_LINKS``) registered here with :class:`PageLinkAdmin`, whose only
URL redirects to the page. An entry appears only when its page exists in this
process (a feature's page, the tasks page where a Tasks framework is installed) and, like the dashboard,
only for users who may view it.
"""

from __future__ import annotations

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseNotAllowed, HttpResponseRedirect
from django.urls import URLPattern, path, reverse

from ..admin_pages import pages
from ..models import PAGE_LINKS
from .access import TOKEN_ATTRIBUTE, authorize_hook, can_view
from .options import ViewOnlyAdmin


class PageLinkAdmin(ViewOnlyAdmin):
    """An admin index entry that leads to one Wurk page."""

    def get_urls(self) -> list[URLPattern]:
        name = f"{self.opts.app_label}_{self.opts.model_name}_changelist"
        view = self.admin_site.admin_view(self.go)
        view.wurk_methods, view.wurk_token = ("GET", "HEAD"), False  # type: ignore[attr-defined]
        return [path("", view, name=name)]

    def go(self, request: HttpRequest) -> HttpResponse:
        if request.method not in ("GET", "HEAD"):
            return HttpResponseNotAllowed(("GET", "HEAD"))
        if not can_view(request):
            raise PermissionDenied("wurk_django.view_dashboard is needed to see the Wurk pages")
        setattr(request, TOKEN_ATTRIBUTE, False)
        if not authorize_hook(request):  # asked for every Wurk view, this redirect too
            raise PermissionDenied("refused by WURK['ADMIN_AUTHORIZE']")
        page = next(p for p in pages() if p.key == self.model.page_key)
        return HttpResponseRedirect(reverse(f"{self.admin_site.name}:{page.url_name}", kwargs=page.url_kwargs))


def register_links(site: admin.AdminSite) -> None:
    """Register an index entry for every Wurk page that exists, on ``site``."""
    present = {page.key for page in pages() if page.tab}
    for model in PAGE_LINKS:
        if model.page_key in present and not site.is_registered(model):
            site.register(model, PageLinkAdmin)
