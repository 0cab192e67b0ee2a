"""The HTTP API on its own, without the project's URLs: ``/v1/...`` and nothing else.

``manage.py wurk_http_api`` serves :data:`application` with Django's threaded development
server; in production point a WSGI server at :mod:`wurk_django.http_api.wsgi`
(``gunicorn wurk_django.http_api.wsgi``). Either way the project's settings (and so its
``WURK``, middleware and ``INSTALLED_APPS``) apply; only the URLconf is this module.
"""

from __future__ import annotations

from django.core.handlers.wsgi import WSGIHandler
from django.http import HttpRequest, HttpResponse
from django.urls import include, path

urlpatterns = [path("v1/", include("wurk_django.http_api.urls"))]


class Handler(WSGIHandler):
    """Django's WSGI handler answering from this module's URLs instead of ``ROOT_URLCONF``."""

    def get_response(self, request: HttpRequest) -> HttpResponse:
        request.urlconf = __name__
        return super().get_response(request)
