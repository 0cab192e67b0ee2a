"""The Wurk pages inside Django's admin (DJ-050..DJ-057).

Importing this module (Django's admin autodiscovery does) registers the
dashboard, and an index entry per page, with the default admin site. For
another ``AdminSite``::

    from wurk_django.admin import WurkAdmin, register_links
    from wurk_django.models import Dashboard

    my_site.register(Dashboard, WurkAdmin)
    register_links(my_site)   # optional: the other pages on the index too
"""

from django.contrib import admin

from ..models import Dashboard
from .index_links import register_links
from .options import WurkAdmin

__all__ = ["WurkAdmin", "register_links"]

if not admin.site.is_registered(Dashboard):
    admin.site.register(Dashboard, WurkAdmin)
    register_links(admin.site)
