"""Two admin sites: the default one and a custom one with its own name, both
carrying the Wurk pages (DJ-050)."""

from django.contrib import admin
from django.urls import path

from wurk_django.admin import WurkAdmin
from wurk_django.models import Dashboard


class OpsSite(admin.AdminSite):
    site_header = "Ops console"


ops_site = OpsSite(name="ops")
ops_site.register(Dashboard, WurkAdmin)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("ops/", ops_site.urls),
]
