"""The admin page registry: every Wurk tab and its URLs, built-in or added by a feature.

A feature adds its pages from its ``install()``::

    from django.utils.translation import gettext_lazy

    from wurk_django.admin_pages import Page, register

    register(Page(
        key="batches", label=gettext_lazy("Batches"), url_name="wurk_batches", position=80,
        urls=lambda admin: [
            path("batches/", admin.wrap(views.index), name="wurk_batches"),
            path("batches/<str:bid>/", admin.wrap(views.detail, methods=admin.POST), name="wurk_batch"),
        ],
    ))

``urls(model_admin)`` is called from :meth:`WurkAdmin.get_urls`; wrap every view
with ``model_admin.wrap`` (staff login, view permission, CSRF, manage
permission and read-only mode for POST) or ``model_admin.api`` (JSON for a
staff session with the view permission; ``token=True`` opens it to
``WURK["API_TOKEN"]`` too, which only the documented read-outs do: job data stays
behind a login), so a feature's page has exactly the rules of the others. Each
URL needs a row in docs/admin.md's access table (tests/admin/test_access_table.py).
A view renders with :func:`wurk_django.admin.common.render` and ``section=key``
so its tab shows as the current one.

This module lives outside the ``admin`` package on purpose: importing that
package imports the admin and the models, which a worker started from a bare
``Config`` (no Django settings) cannot do, and every feature's ``install()``
registers its page here. Keep the views behind the ``urls`` callable.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.urls import URLPattern


@dataclass(frozen=True)
class Page:
    key: str  # the tab's id; views pass it as ``section``
    label: Any  # the tab's text: gettext_lazy("..."), so it follows the reader's language
    url_name: str  # the URL name the tab links to (reversed in the current admin site)
    urls: Callable[[Any], list[URLPattern]]  # model_admin -> URL patterns, under the dashboard's prefix
    position: int  # tab order, lowest first; built-ins use 10..70
    tab: bool = True  # False: URLs only, no tab
    url_kwargs: dict[str, Any] = field(default_factory=dict)


_pages: dict[str, Page] = {}
_lock = threading.Lock()


def register(page: Page) -> None:
    """Add (or replace, by ``key``) a page."""
    with _lock:
        _pages[page.key] = page


def unregister(key: str) -> None:
    with _lock:
        _pages.pop(key, None)


def pages() -> list[Page]:
    """Every registered page, in tab order.

    The core pages register when :mod:`wurk_django.admin` is imported (its
    ``options`` imports ``builtin``); features register theirs from ``install()``.
    """
    # Lazy: features.install() imports the feature packages, and their install()
    # imports this module to register pages; it also must run at first use, not
    # at import (install() may not run before Django is set up).
    from . import features

    features.install(features.ADMIN)
    with _lock:
        return sorted(_pages.values(), key=lambda p: (p.position, p.key))
