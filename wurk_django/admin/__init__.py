"""The Wurk pages inside Django's admin (DJ-050..DJ-057).

Importing this module (Django's admin autodiscovery does) registers the
dashboard with the default admin site. For another ``AdminSite``::

    from wurk_django.admin import WurkAdmin
    from wurk_django.models import Dashboard

    my_site.register(Dashboard, WurkAdmin)
"""

from django.contrib import admin

from ..models import Dashboard
from .options import WurkAdmin

__all__ = ["WurkAdmin"]

if not admin.site.is_registered(Dashboard):
    admin.site.register(Dashboard, WurkAdmin)
