"""A request body turned into a push through the one push door (:class:`wurk_django.client.Client`).

The item handed to the door is built the way ``Job.set(**options).perform_async(*args)``
builds its own (options first, then ``class`` and ``args``, ``kwargs`` and ``at`` last), and
a class a Python process defines is passed as that class: the job stored is the one
``perform_async`` would store, byte for byte but for its jid and timestamps. A class name
no Python process defines (a Ruby worker's) is pushed as the name, and only when listed
exactly in ``HTTP_API_JOB_CLASSES``.
"""

from __future__ import annotations

import datetime as dt
import math
import time
from typing import Any

from .. import context, payload, registry
from ..errors import UnknownJobClass
from .problems import Problem

#: Push options a request may carry beside class/args/kwargs/at/in, passed to the door as given.
OPTIONS = ("queue", "retry", "retry_for", "retry_queue", "tags", "backtrace", "dead", "expires_in",
           "unique_for", "unique_until", "deadline", "deadline_action", "track")
#: Every key a job of ``POST /v1/jobs`` may have.
JOB_KEYS = ("class", "args", "kwargs", "at", "in", *OPTIONS)


def job_class(name: str) -> Any:
    """The Python job class answering to ``name`` (imported on a miss as a worker would,
    within ``IMPORT_ON_MISS``), or ``None`` when no Python process defines one."""
    try:
        return registry.resolve(name)
    except UnknownJobClass:
        return None


def allowed(name: str) -> Any:
    """What ``HTTP_API_JOB_CLASSES`` lets a push of ``name`` be: the Python job class, the
    name itself (listed exactly, no Python class: a Ruby worker's), or ``None`` when it may
    not be enqueued. An entry ``prefix.*`` admits the registered Python job classes under
    that prefix, never a bare name. Nothing is allowed by default."""
    entries = context.config().http_api_job_classes
    listed = name in entries
    if not listed and not any(entry.endswith(".*") and name.startswith(entry[:-1]) for entry in entries):
        return None
    found = job_class(name)
    if found is not None:
        return found
    return name if listed else None


def check_class(body: dict[str, Any]) -> Any:
    """The ``class`` to push: the Python class when one answers to the name, else the name."""
    name = body.get("class")
    if not isinstance(name, str) or not name:
        raise Problem("invalid-job", f"'class' must be a job class name (a non-empty string), not {name!r:.80}")
    klass = allowed(name)
    if klass is None:
        raise Problem("class-not-allowed", f"job class {name!r:.200} is not in WURK['HTTP_API_JOB_CLASSES']",
                      **{"class": name[:200]})
    return klass


def run_at(body: dict[str, Any]) -> float | None:
    """Epoch seconds the job should run at from ``at`` (epoch seconds or an RFC 3339 time with
    an offset) or ``in`` (seconds from now); ``None`` when it runs now (as ``perform_in``, a
    time not in the future is now)."""
    if "at" in body and "in" in body:
        raise Problem("invalid-job", "give 'at' or 'in', not both")
    if "in" in body:
        seconds = body["in"]
        if not _number(seconds):
            raise Problem("invalid-job", f"'in' must be a number of seconds, not {seconds!r:.80}")
        at = time.time() + seconds
    elif "at" in body:
        at = epoch(body["at"], "at")
    else:
        return None
    return at if at > time.time() else None


def epoch(value: Any, what: str) -> float:
    """Epoch seconds of a number or an RFC 3339 string with an offset (``...Z``, ``...+02:00``)."""
    if _number(value):
        return float(value)
    if isinstance(value, str):
        try:
            moment = dt.datetime.fromisoformat(value)
        except ValueError:
            moment = None
        if moment is not None and moment.utcoffset() is not None:
            return moment.timestamp()
    raise Problem("invalid-job", f"'{what}' must be epoch seconds or an RFC 3339 time with an offset, "
                                 f"not {value!r:.80}")


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def check_keys(body: dict[str, Any], known: tuple[str, ...]) -> None:
    unknown = [key for key in body if key not in known]
    if unknown:
        raise Problem("invalid-job", f"unknown job keys {unknown!r:.200}; a job takes {', '.join(known)}")


def check_size(args: Any, kwargs: Any) -> None:
    limit = context.config().http_api_max_args_bytes
    size = len(payload.dumps(args)) + (len(payload.dumps(kwargs)) if kwargs else 0)
    if size > limit:
        raise Problem("arguments-too-large", f"args and kwargs take {size} bytes of JSON; the limit is {limit}",
                      size=size, limit=limit)


def options_of(body: dict[str, Any]) -> dict[str, Any]:
    options = {key: body[key] for key in OPTIONS if key in body}
    if "deadline" in options and not _number(options["deadline"]):
        options["deadline"] = epoch(options["deadline"], "deadline")
    return options


def item_for(body: dict[str, Any]) -> dict[str, Any]:
    """The item ``POST /v1/jobs`` hands to :meth:`Client.push`; :class:`Problem` when the
    body cannot be one (the door's own ``ValueError`` is turned into one by the view)."""
    check_keys(body, JOB_KEYS)
    klass = check_class(body)
    args = body.get("args", [])
    if not isinstance(args, list):
        raise Problem("invalid-job", f"'args' must be a JSON array, not {type(args).__name__}")
    kwargs = body.get("kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise Problem("invalid-job", f"'kwargs' must be a JSON object, not {type(kwargs).__name__}")
    check_size(args, kwargs)
    at = run_at(body)
    # perform_async's order: options, class, args, then kwargs and at.
    item: dict[str, Any] = {**options_of(body), "class": klass, "args": args}
    if kwargs:
        item["kwargs"] = kwargs
    if at is not None:
        item["at"] = at
    return item


BULK_KEYS = ("class", "args", "kwargs", "at", "in", "spread_interval", *OPTIONS)


def bulk_item_for(body: dict[str, Any]) -> dict[str, Any]:
    """The item ``POST /v1/jobs/bulk`` hands to :meth:`Client.push_bulk`: one class, ``args``
    a list of argument lists (``push_bulk``'s own shape), the options shared."""
    check_keys(body, BULK_KEYS)
    klass = check_class(body)
    args_list = body.get("args")
    if not isinstance(args_list, list) or not args_list or not all(isinstance(a, list) for a in args_list):
        raise Problem("invalid-job", "'args' must be a non-empty array of argument arrays, one per job")
    limit = context.config().http_api_max_bulk
    if len(args_list) > limit:
        raise Problem("too-many-jobs", f"{len(args_list)} jobs in one bulk push; the limit is {limit}",
                      count=len(args_list), limit=limit)
    kwargs = body.get("kwargs")
    if kwargs is not None and not isinstance(kwargs, dict):
        raise Problem("invalid-job", f"'kwargs' must be a JSON object, not {type(kwargs).__name__}")
    for args in args_list:
        check_size(args, kwargs)
    item: dict[str, Any] = {**options_of(body), "class": klass, "args": args_list}
    if kwargs:
        item["kwargs"] = kwargs
    at = run_at(body)
    if at is not None:
        item["at"] = at
    if "spread_interval" in body:
        item["spread_interval"] = body["spread_interval"]
    return item
