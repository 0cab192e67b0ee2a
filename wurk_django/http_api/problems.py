"""Every error of the HTTP API as an RFC 9457 problem document (``application/problem+json``).

Each kind of problem has a stable ``type`` URI, ``urn:wurk-django:problem:<slug>``, that a
client may branch on; ``title`` is the same for every occurrence of a type, ``detail``
says what was wrong with this request. The types are listed in docs/http-api.md, and
:data:`TYPES` is the one list the views, the OpenAPI document and the tests read.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpResponse

CONTENT_TYPE = "application/problem+json"
PREFIX = "urn:wurk-django:problem:"

#: slug -> (HTTP status, title).
TYPES: dict[str, tuple[int, str]] = {
    "invalid-body": (400, "The request body is not a JSON object"),
    "invalid-idempotency-key": (400, "The Idempotency-Key header is not usable"),
    "unauthorized": (401, "A valid bearer token is required"),
    "forbidden": (403, "The token lacks the scope this endpoint needs"),
    "class-not-allowed": (403, "This job class may not be enqueued over HTTP"),
    "not-found": (404, "No such endpoint"),
    "job-not-found": (404, "No scheduled or retrying job has this jid"),
    "job-unknown": (404, "No job is known by this jid: unknown or untracked"),
    "method-not-allowed": (405, "This endpoint does not take this method"),
    "job-not-deletable": (409, "The job is not scheduled or retrying"),
    "idempotency-key-in-use": (409, "A request with this Idempotency-Key is still being answered"),
    "body-too-large": (413, "The request body is larger than HTTP_API_MAX_BODY_BYTES"),
    "unsupported-media-type": (415, "The request body must be application/json"),
    "invalid-job": (422, "The job cannot be pushed as given"),
    "arguments-too-large": (422, "The job's arguments are larger than HTTP_API_MAX_ARGS_BYTES"),
    "too-many-jobs": (422, "The bulk push has more jobs than HTTP_API_MAX_BULK"),
    "idempotency-key-reused": (422, "This Idempotency-Key was used for a different request"),
    "rate-limited": (429, "The token made too many requests; retry later"),
    "redis-unavailable": (503, "Redis did not answer; retry later"),
}


def type_uri(slug: str) -> str:
    return PREFIX + slug


class Problem(Exception):
    """Raised anywhere below a view to answer with a problem document. ``headers`` are
    added to the response (``Retry-After``, ``Allow``, ``WWW-Authenticate``); ``extra`` are
    extension members of the document (e.g. ``state`` for a job that cannot be deleted)."""

    def __init__(self, slug: str, detail: str, *, headers: dict[str, str] | None = None, **extra: Any) -> None:
        if slug not in TYPES:
            raise ValueError(f"unknown problem type {slug!r}")
        super().__init__(detail)
        self.slug = slug
        self.detail = detail
        self.headers = headers or {}
        self.extra = extra

    @property
    def status(self) -> int:
        return TYPES[self.slug][0]

    def document(self, instance: str | None = None) -> dict[str, Any]:
        status, title = TYPES[self.slug]
        body: dict[str, Any] = {"type": type_uri(self.slug), "title": title, "status": status, "detail": self.detail}
        if instance:
            body["instance"] = instance
        body.update(self.extra)
        return body

    def response(self, instance: str | None = None) -> HttpResponse:
        response = HttpResponse(json.dumps(self.document(instance)), status=self.status, content_type=CONTENT_TYPE)
        for name, value in self.headers.items():
            response[name] = value
        return response
