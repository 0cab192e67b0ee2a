"""The OpenAPI 3.1 document of the ``/v1`` endpoints, served at ``openapi.json`` and checked
against the endpoints by a property-based test (tests/http_api/test_openapi.py, schemathesis)."""

from __future__ import annotations

from typing import Any

from ..results.tracking import MAX_TTL
from .jobs import OPTIONS
from .problems import CONTENT_TYPE, PREFIX, TYPES
from .status import STATES

NUMBER_OR_TIME = {"oneOf": [{"type": "number"}, {"type": "string", "format": "date-time"}]}

_OPTION_SCHEMAS: dict[str, Any] = {
    "queue": {"type": "string", "description": "Queue to push to (default: the class's, else `default`)."},
    "retry": {"oneOf": [{"type": "boolean"}, {"type": "integer", "minimum": 0}],
              "description": "Retry on failure, or how many times."},
    "retry_for": {"type": "number", "description": "Retry for at most this many seconds."},
    "retry_queue": {"type": "string", "description": "Queue retries run on."},
    "tags": {"type": "array", "items": {"type": "string"}},
    "backtrace": {"oneOf": [{"type": "boolean"}, {"type": "integer"}]},
    "dead": {"type": "boolean", "description": "Whether an exhausted job goes to the dead set."},
    "expires_in": {"type": "number", "description": "Seconds after which the job is skipped unrun."},
    "unique_for": {"type": "number", "description": "Seconds a unique lock holds."},
    "unique_until": {"type": "string", "enum": ["success", "start"]},
    "deadline": {**NUMBER_OR_TIME, "description": "Epoch seconds or RFC 3339 time the job must start by."},
    "deadline_action": {"type": "string", "enum": ["dead", "discard"]},
    "track": {"oneOf": [{"type": "boolean"}, {"type": "integer", "minimum": 1, "maximum": MAX_TTL}],
              "description": "Keep a status record (true: `TRACK_TTL` seconds; a number: that many), read by "
                             "`GET /v1/jobs/{jid}` under `result`."},
}
assert set(_OPTION_SCHEMAS) == set(OPTIONS)

_PROBLEM = {
    "type": "object",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string", "enum": [PREFIX + slug for slug in TYPES]},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
    },
}

_JOB_COMMON: dict[str, Any] = {
    "class": {"type": "string", "minLength": 1, "description": "Job class name (see HTTP_API_JOB_CLASSES)."},
    "kwargs": {"type": "object", "description": "Keyword arguments of `perform`."},
    "at": {**NUMBER_OR_TIME, "description": "When to run: epoch seconds or an RFC 3339 time with an offset."},
    "in": {"type": "number", "description": "When to run: seconds from now."},
    **_OPTION_SCHEMAS,
}

JOB = {
    "type": "object", "required": ["class"], "additionalProperties": False,
    "properties": {**_JOB_COMMON, "args": {"type": "array", "description": "Positional arguments."}},
}
BULK = {
    "type": "object", "required": ["class", "args"], "additionalProperties": False,
    "properties": {**_JOB_COMMON,
                   "args": {"type": "array", "minItems": 1, "items": {"type": "array"},
                            "description": "One argument array per job."},
                   "spread_interval": {"type": "number", "exclusiveMinimum": 0,
                                       "description": "Spread the jobs at random over this many seconds."}},
}
STATUS = {
    "type": "object", "required": ["jid", "state", "result"],
    "properties": {
        "jid": {"type": "string"},
        "state": {"type": "string", "enum": list(STATES)},
        "class": {"type": "string"},
        "queue": {"type": ["string", "null"]},
        "at": {"type": "number", "description": "Run time (scheduled, retry) or time of death (dead)."},
        "created_at": {"type": ["number", "null"]},
        "enqueued_at": {"type": ["number", "null"]},
        "started_at": {"type": ["number", "null"]},
        "retry_count": {"type": "integer"},
        "error_class": {"type": ["string", "null"]},
        "error_message": {"type": ["string", "null"]},
        "result": {"type": ["object", "null"], "description": "The job's status record (state, progress, message, result, last error, timings), when it keeps one: a tracked class, a Celery task or a django.tasks result."},
    },
}


def _problems(*statuses: int) -> dict[str, Any]:
    return {str(code): {"description": _described(code),
                        "content": {CONTENT_TYPE: {"schema": {"$ref": "#/components/schemas/Problem"}}}}
            for code in statuses}


def _described(code: int) -> str:
    return "; ".join(f"{PREFIX}{slug}" for slug, (status, _) in TYPES.items() if status == code)


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


_AUTH = (401, 403, 429, 503)
_IDEMPOTENCY = {"name": "Idempotency-Key", "in": "header", "required": False,
                "schema": {"type": "string", "minLength": 1, "maxLength": 255},
                "description": "Replays the first answer to this key for HTTP_API_IDEMPOTENCY_TTL seconds."}
_QUEUE = {"name": "queue", "in": "query", "required": False, "schema": {"type": "string"},
          "description": "The job's queue: a job that keeps no status record is looked for there (and in the "
                         "running work) only."}
_JID = {"name": "jid", "in": "path", "required": True,
        "schema": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$"}}


def _post(summary: str, schema_name: str, answer: dict[str, Any]) -> dict[str, Any]:
    return {
        "summary": summary, "security": [{"bearer": []}], "parameters": [_IDEMPOTENCY],
        "requestBody": {"required": True, "content": {"application/json": {
            "schema": {"$ref": f"#/components/schemas/{schema_name}"}}}},
        "responses": {"201": _json(answer, "Pushed."),
                      "200": _json(answer, "Not pushed: a client middleware stopped it."),
                      **_problems(400, *_AUTH, 409, 413, 415, 422)},
    }


def document(server: str = "/") -> dict[str, Any]:
    """The OpenAPI 3.1 document, its server the mount point the request came through."""
    pushed = {"type": "object", "required": ["jid", "enqueued"],
              "properties": {"jid": {"type": ["string", "null"]}, "enqueued": {"type": "boolean"},
                             "detail": {"type": "string"}}}
    bulk_pushed = {"type": "object", "required": ["jids", "enqueued"],
                   "properties": {"jids": {"type": "array", "items": {"type": ["string", "null"]}},
                                  "enqueued": {"type": "integer"}}}
    queue = {"type": "object", "required": ["name", "size", "latency", "paused"],
             "properties": {"name": {"type": "string"}, "size": {"type": "integer"},
                            "latency": {"type": "number"}, "paused": {"type": "boolean"}}}
    process = {"type": "object", "required": ["identity"], "properties": {
        "identity": {"type": "string"}, "hostname": {"type": ["string", "null"]},
        "pid": {"type": ["integer", "null"]}, "busy": {"type": ["integer", "null"]},
        "concurrency": {"type": ["integer", "null"]}, "queues": {"type": ["array", "null"]},
        "quiet": {"type": "boolean"}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "wurk_django HTTP producer API", "version": "1",
                 "description": "Push jobs and read their status over HTTP; see docs/http-api.md."},
        "servers": [{"url": server}],
        "paths": {
            "/jobs": {"post": _post("Push one job", "Job", pushed)},
            "/jobs/bulk": {"post": _post("Push many jobs of one class", "BulkJobs", bulk_pushed)},
            "/jobs/{jid}": {
                "parameters": [_JID],
                "get": {"summary": "Where a job is now", "security": [{"bearer": []}],
                        "parameters": [_QUEUE],
                        "responses": {"200": _json({"$ref": "#/components/schemas/JobStatus"}, "The status."),
                                      **_problems(*_AUTH, 404)}},
                "delete": {"summary": "Delete a scheduled or retrying job (admin scope)",
                           "security": [{"bearer": []}],
                           "responses": {"200": _json({"type": "object", "required": ["jid", "deleted"],
                                                       "properties": {"jid": {"type": "string"},
                                                                      "deleted": {"type": "boolean"},
                                                                      "state": {"type": "string"}}},
                                                      "Deleted."),
                                         **_problems(*_AUTH, 404, 409)}},
            },
            "/queues": {"get": {"summary": "Queues with their size, latency and pause",
                                "security": [{"bearer": []}],
                                "responses": {"200": _json({"type": "object", "required": ["queues"],
                                                            "properties": {"queues": {"type": "array",
                                                                                      "items": queue}}},
                                                           "The queues."),
                                              **_problems(*_AUTH)}}},
            "/processes": {"get": {"summary": "Live worker processes", "security": [{"bearer": []}],
                                   "responses": {"200": _json({"type": "object", "required": ["processes"],
                                                               "properties": {"processes": {"type": "array",
                                                                                            "items": process}}},
                                                              "The processes."),
                                                 **_problems(*_AUTH)}}},
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {"Problem": _PROBLEM, "Job": JOB, "BulkJobs": BULK, "JobStatus": STATUS},
        },
    }
