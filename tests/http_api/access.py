"""Helpers of the HTTP API tests."""

from __future__ import annotations

from wurk_django.http_api import problems


def assert_problem(response, status: int, slug: str) -> dict:
    """The response is the RFC 9457 problem ``slug`` with ``status``; its document."""
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/problem+json"
    body = response.json()
    assert body["type"] == f"urn:wurk-django:problem:{slug}"
    assert body["status"] == status
    assert body["title"] == problems.TYPES[slug][1]
    assert body["detail"]
    return body
