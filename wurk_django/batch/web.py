"""``BatchStatusMiddleware``: batch progress as JSON for your own pages (PRO-262).

Add ``"wurk_django.batch.web.BatchStatusMiddleware"`` to ``MIDDLEWARE`` and
``GET /batch_status/<bid>.json`` answers with ``Status(bid).data()`` (404 when
there is no such batch); every other request passes through untouched.

It asks for no login, as Sidekiq Pro's equivalent: the bid (80 random bits) is
the only key. Give bids only to the people who may see that batch, or write
your own view around :meth:`Status.data` with your own permission check. The
admin has the same JSON behind its own rules at ``<admin>/wurk_django/dashboard/
batches/<bid>.json``.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse, JsonResponse

from .status import Status

PATH = re.compile(r"^/batch_status/(?P<bid>[A-Za-z0-9_-]{1,64})\.json$")


class BatchStatusMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        match = PATH.match(request.path_info)
        if match is None or request.method not in ("GET", "HEAD"):
            return self.get_response(request)
        status = Status(match["bid"])
        if status.exists:
            response = JsonResponse(status.data())
        else:
            response = JsonResponse({"error": "no such batch", "bid": match["bid"]}, status=404)
        response["Cache-Control"] = "private, no-store"
        return response
