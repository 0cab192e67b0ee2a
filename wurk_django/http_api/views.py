"""The ``/v1`` endpoints. Each is wrapped by :func:`endpoint`, which answers every error
with a problem document, checks the method, the bearer token, its scope and its rate
limit, in that order, before the view reads anything the caller sent."""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

import redis as redis_lib
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from .. import context
from . import idempotency, jobs, rate, status
from .problems import Problem
from .tokens import ADMIN, ENQUEUE, READ, Token, authenticate

logger = logging.getLogger("wurk_django.http_api")

View = Callable[..., HttpResponse]


def endpoint(scopes: dict[str, str]) -> Callable[[View], View]:
    """Wrap a view taking ``(request, token, ...)``; ``scopes`` maps each method it takes to
    the scope that method needs."""

    def wrap(view: View) -> View:
        @csrf_exempt  # a bearer token, not a cookie, authenticates: no cross-site request can forge one
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                scope = scopes.get(request.method or "")
                if scope is None:
                    raise Problem("method-not-allowed", f"{request.method} is not taken here",
                                  headers={"Allow": ", ".join(scopes)})
                token = _token(request)
                if not token.allows(scope):
                    raise Problem("forbidden", f"token {token.name!r} lacks the {scope!r} scope",
                                  scope=scope)
                rate.check(token)
                return view(request, token, *args, **kwargs)
            except Problem as problem:
                return problem.response(request.path)
            except redis_lib.RedisError as exc:
                logger.warning("HTTP API %s %s: Redis error %s", request.method, request.path, exc)
                return Problem("redis-unavailable", f"Redis error: {type(exc).__name__}",
                               headers={"Retry-After": "5"}).response(request.path)

        return wrapped

    return wrap


def _token(request: HttpRequest) -> Token:
    token = authenticate(request.headers.get("Authorization", ""))
    if token is None:
        detail = ("no tokens are configured (WURK['HTTP_API_TOKENS'])" if not context.config().http_api_tokens
                  else "send Authorization: Bearer <token> with a configured token")
        raise Problem("unauthorized", detail, headers={"WWW-Authenticate": 'Bearer realm="wurk"'})
    return token


def _body(request: HttpRequest) -> tuple[dict[str, Any], bytes]:
    """The JSON object the request carries, and its bytes (for an idempotency fingerprint)."""
    limit = context.config().http_api_max_body_bytes
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        raise Problem("body-too-large", f"the body has {declared} bytes; the limit is {limit}", limit=limit)
    content_type = request.content_type or ""
    if content_type != "application/json" and not (content_type.startswith("application/")
                                                   and content_type.endswith("+json")):
        raise Problem("unsupported-media-type", f"send Content-Type: application/json, not {content_type!r:.80}")
    try:
        raw = request.body
    except RequestDataTooBig:
        raise Problem("body-too-large", "the body is larger than Django's DATA_UPLOAD_MAX_MEMORY_SIZE",
                      limit=limit) from None
    if len(raw) > limit:
        raise Problem("body-too-large", f"the body has {len(raw)} bytes; the limit is {limit}", limit=limit)
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Problem("invalid-body", f"the body is not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise Problem("invalid-body", f"the body must be a JSON object, not {type(body).__name__}")
    return body, raw


def _pushing(request: HttpRequest, token: Token, push: Callable[[dict[str, Any]], tuple[int, Any]]) -> HttpResponse:
    """Run ``push`` on the body, once per ``Idempotency-Key`` when one is sent."""
    body, raw = _body(request)
    key = request.headers.get(idempotency.HEADER)
    if key is None:
        status_code, answer = push(body)
        return JsonResponse(answer, status=status_code, safe=False)
    held = idempotency.claim(token.name, key, idempotency.fingerprint(request.method or "", request.path, raw))
    if isinstance(held, idempotency.Stored):
        response = JsonResponse(held.body, status=held.status, safe=False)
        response[idempotency.REPLAYED] = "true"
        return response
    try:
        status_code, answer = push(body)
    except BaseException:
        held.release()  # refused or failed: nothing was pushed, the client may try again
        raise
    held.keep(status_code, answer)
    return JsonResponse(answer, status=status_code, safe=False)


def _door_error(exc: Exception) -> Problem:
    return Problem("invalid-job", str(exc)[:1000])


def _push_one(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    from ..client import Client

    item = jobs.item_for(body)
    try:
        jid = Client().push(item)
    except (ValueError, TypeError) as exc:
        raise _door_error(exc) from None
    if jid is None:
        return 200, {"jid": None, "enqueued": False,
                     "detail": "a client middleware stopped the push (a unique lock held, a throttle slot taken)"}
    return 201, {"jid": jid, "enqueued": True}


def _push_bulk(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    from ..client import Client

    item = jobs.bulk_item_for(body)
    client = Client()
    try:
        client.check_bulk(item)  # every job checked before the first is sent
        jids = client.push_bulk(item)
    except (ValueError, TypeError) as exc:
        raise _door_error(exc) from None
    return 201, {"jids": jids, "enqueued": sum(1 for jid in jids if jid is not None)}


@endpoint({"POST": ENQUEUE})
def create_job(request: HttpRequest, token: Token) -> HttpResponse:
    """``POST /v1/jobs``: push one job; 201 with its jid."""
    return _pushing(request, token, _push_one)


@endpoint({"POST": ENQUEUE})
def create_jobs(request: HttpRequest, token: Token) -> HttpResponse:
    """``POST /v1/jobs/bulk``: push many jobs of one class; 201 with their jids."""
    return _pushing(request, token, _push_bulk)


@endpoint({"GET": READ, "DELETE": ADMIN})
def job(request: HttpRequest, token: Token, jid: str) -> HttpResponse:
    """``GET /v1/jobs/<jid>[?queue=<name>]``: where the job is (404 ``job-unknown`` for a job with
    no status record that is neither running nor in the named queue); ``DELETE``: remove a
    scheduled or retrying job."""
    if request.method == "GET":
        queue = request.GET.get("queue") or None
        found = status.job_status(jid, queue)
        if found is None:
            where = f"running nor in queue {queue!r:.100}" if queue is not None else "running"
            raise Problem("job-unknown", f"job {jid!r:.100} keeps no status record and is not {where}: unknown "
                                         "or untracked (a job with no record is looked for only there)")
        return JsonResponse(found)
    return _delete(jid)


def _delete(jid: str) -> HttpResponse:
    from ..api import RetrySet, ScheduledSet

    for name, jobs_set in ((status.SCHEDULED, ScheduledSet()), (status.RETRY, RetrySet())):
        entry = jobs_set.find_job(jid)
        if entry is not None and entry.delete():
            return JsonResponse({"jid": jid, "deleted": True, "state": name})
    where = status.job_status(jid, everywhere=True)["state"]
    if where in (status.UNKNOWN, status.SCHEDULED, status.RETRY):  # gone meanwhile: nothing left to delete
        raise Problem("job-not-found", f"no scheduled or retrying job has jid {jid!r:.100}")
    raise Problem("job-not-deletable", f"job {jid!r:.100} is {where}; only a scheduled or retrying job is deleted",
                  state=where)


@endpoint({"GET": READ})
def queues(request: HttpRequest, token: Token) -> HttpResponse:
    """``GET /v1/queues``: each queue's size, latency and pause."""
    from ..api import Queue

    return JsonResponse({"queues": [{"name": q.name, "size": q.size, "latency": q.latency, "paused": q.paused}
                                    for q in Queue.all()]})


PROCESS_FIELDS = ("identity", "hostname", "pid", "tag", "labels", "queues", "concurrency", "busy", "beat",
                  "started_at", "version")


@endpoint({"GET": READ})
def processes(request: HttpRequest, token: Token) -> HttpResponse:
    """``GET /v1/processes``: the live worker processes (Ruby ones included)."""
    from ..api import ProcessSet

    listed = []
    for process in ProcessSet(clean=False):
        entry = {name: process.get(name) for name in PROCESS_FIELDS}
        entry["quiet"] = process.get("quiet") == "true"
        listed.append(entry)
    return JsonResponse({"processes": listed})


def openapi(request: HttpRequest) -> HttpResponse:
    """``GET /v1/openapi.json``: the OpenAPI 3.1 document (no token needed: it holds no data)."""
    if request.method not in ("GET", "HEAD"):
        return Problem("method-not-allowed", f"{request.method} is not taken here",
                       headers={"Allow": "GET"}).response(request.path)
    from .openapi import document

    return JsonResponse(document(request.build_absolute_uri("./")), json_dumps_params={"indent": 1})


@csrf_exempt
def not_found(request: HttpRequest, rest: str = "") -> HttpResponse:
    """Anything else under the mount point: a problem, not Django's HTML page."""
    return Problem("not-found", f"no endpoint at {request.path!r:.200}").response(request.path)
