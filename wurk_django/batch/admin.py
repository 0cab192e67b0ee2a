"""The Batches pages of the admin, and the JSON status endpoint a progress page polls (PRO-262, PRO-360)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse, JsonResponse


def status_json(request: HttpRequest, model_admin, bid: str) -> HttpResponse:
    """``Status.data()`` of one batch as JSON; 404 when there is no such batch."""
    from .status import Status

    status = Status(bid)
    if not status.exists:
        return JsonResponse({"error": "no such batch", "bid": bid}, status=404)
    return JsonResponse(status.data())


def _urls(admin):
    from django.urls import path

    return [
        path("batch_status/<str:bid>.json", admin.api(status_json), name="wurk_batch_status"),
    ]


def register_pages() -> None:
    from ..admin.pages import Page, register

    register(Page("batch_status", "Batch status", "wurk_batch_status", _urls, 81, tab=False))
