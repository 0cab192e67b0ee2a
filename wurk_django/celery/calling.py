"""``apply_async``: Celery's call options mapped onto one wurk push.

=================  ==========================================================
``countdown``      ``perform_in`` seconds (the ``schedule`` set)
``eta``            ``perform_at`` a datetime (naive: Django's ``TIME_ZONE``)
``expires``        ``expires_in``: seconds, or a datetime; a job found past it is skipped
                   (``REVOKED``), as Celery revokes an expired task on receipt
``deadline``       ``deadline`` (an aware datetime or epoch seconds, wurk's own option): a job
                   not started by then is dead (``FAILURE``, ``DeadlineExceeded``), one
                   running then is stopped; ``deadline_action="discard"`` drops it instead
``queue``          ``queue``
``task_id``        ``jid``
``ignore_result``  no result record for this call
``soft_time_limit`` / ``time_limit``  the payload keys the worker enforces
``shadow``         ``display_class`` (the name the admin shows)
``headers``        the payload's ``headers`` (JSON), read by the task as ``self.request.headers``
``retry`` / ``retry_policy``  retry the push itself while Redis is unreachable
=================  ==========================================================

Transport options with no meaning on Redis lists (``priority``, ``routing_key``,
``exchange``, ``serializer``, ``compression``...) are accepted and
ignored; anything else is refused with the list of what is known.
"""

from __future__ import annotations

import datetime as dt
import inspect
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import redis as redis_lib

from .. import context, payload
from .. import deadline as deadlines
from ..client.planning import Companions
from ..job import Setter, _run_at
from ..redis import shards
from ..results import record, store
from . import django_settings as settings
from .result import AsyncResult

if TYPE_CHECKING:
    from .job import CeleryJob

#: Accepted for Celery's sake; nothing on a Redis list corresponds to them.
IGNORED = frozenset({"priority", "routing_key", "exchange", "exchange_type", "serializer", "compression",
                     "delivery_mode", "mandatory", "immediate", "connection", "producer",
                     "publisher", "add_to_parent", "reply_to", "time_to_live"})
KNOWN = frozenset({"countdown", "eta", "expires", "queue", "task_id", "ignore_result", "soft_time_limit",
                   "time_limit", "shadow", "retry", "retry_policy", "headers", "deadline", "deadline_action"})
CANVAS = frozenset({"link", "link_error", "chain", "group_id", "chord"})

#: Celery's default policy for retrying a push (``retry=True``).
DEFAULT_POLICY = {"max_retries": 3, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
_UNREACHABLE = (redis_lib.ConnectionError, redis_lib.TimeoutError)


def _record_commands(job: dict) -> list[tuple[Any, ...]]:
    if not record.keeps_record(job):
        return []
    return record.push_commands(job["jid"], record.first_fields(job), job["result_ttl"])


def _record_here(job: dict) -> None:
    if record.keeps_record(job):
        record.pushed_here(job["jid"], record.first_fields(job))


#: What a Celery call's push carries: a job that asks for a result record (``result_ttl``)
#: gets it written in the push's own round trip, so a reader never sees a pushed task
#: without one; in a testing mode the record lives in this process.
RESULT_RECORD = Companions(commands=_record_commands, in_process=_record_here)


def _seconds_until(when: Any, what: str) -> float:
    if isinstance(when, dt.datetime):
        return _run_at(when) - time.time()
    if isinstance(when, dt.timedelta):
        return when.total_seconds()
    if isinstance(when, bool) or not isinstance(when, (int, float)):
        raise ValueError(f"{what} must be seconds, a timedelta or a datetime, not {when!r}")
    return float(when)


def options_for(job_class: type[CeleryJob], options: Mapping[str, Any]) -> dict[str, Any]:
    """The ``set()`` options of one push, from Celery's ``apply_async`` options."""
    unknown = set(options) - KNOWN - IGNORED - CANVAS
    if unknown:
        raise TypeError(f"apply_async() got unknown options {sorted(unknown)}; known: {sorted(KNOWN)} "
                        f"(ignored: {sorted(IGNORED)})")
    canvas = set(options) & CANVAS - {"link_error"}
    if canvas:
        raise TypeError(f"apply_async() options {sorted(canvas)} are set by the canvas: call task.apply_async(link=...)"
                        " or build it with wurk_django.celery's chain, group, chord; see docs/from-celery.md")
    out: dict[str, Any] = {}
    countdown, eta = options.get("countdown"), options.get("eta")
    if countdown is not None and eta is not None:
        raise ValueError(f"give countdown or eta, not both (countdown={countdown!r}, eta={eta!r})")
    if countdown is not None:
        seconds = _seconds_until(countdown, "countdown")
        if seconds > 0:
            out["wait"] = seconds
    elif eta is not None:
        if not isinstance(eta, dt.datetime):
            raise ValueError(f"eta must be a datetime, not {eta!r} (countdown takes seconds)")
        out["wait_until"] = eta
    expires = options.get("expires", job_class.expires)
    if expires is not None:
        # A past expiry still pushes the job, which is then skipped, as Celery revokes it on receipt.
        out["expires_in"] = max(_seconds_until(expires, "expires"), 0.001)
    if options.get("deadline") is not None:
        # Checked here, so an eager call refuses a bad one too; the push stores epoch seconds
        # and refuses a countdown/eta after it. Beside expires, not instead: see docs/from-celery.md.
        out.update(deadline_options(options["deadline"], options.get("deadline_action")))
    if options.get("queue") is not None:
        out["queue"] = options["queue"]
    if options.get("task_id") is not None:
        out["jid"] = store.check_id(options["task_id"])
    for name in ("soft_time_limit", "time_limit"):
        if options.get(name) is not None:
            out[name] = options[name]
    headers = options.get("headers")
    if headers:
        if not isinstance(headers, Mapping):
            raise TypeError(f"headers must be a dict, not {headers!r}")
        out["headers"] = dict(headers)  # the payload's "headers": the task reads self.request.headers
    if options.get("shadow") is not None:
        out["display_class"] = options["shadow"]
    if options.get("link_error"):
        # The errbacks ride in the payload (JSON signatures); the job's death calls them (see .errbacks).
        out["link_error"] = list(options["link_error"])
    ignore = options.get("ignore_result")
    if not (job_class.ignore_result if ignore is None else ignore):
        out["result_ttl"] = job_class.result_ttl()
    return out


def deadline_options(value: Any, action: Any) -> dict[str, Any]:
    """The ``deadline`` options of a call, or ``ValueError`` naming a bad value."""
    out = {"deadline": value, **({} if action is None else {"deadline_action": action})}
    deadlines.normalize(dict(out))
    return out


def _tuples_as_lists(value: Any) -> Any:
    """``value`` with every tuple (a namedtuple too) made a list, as Celery's JSON serializer
    sends it: code passing ``(name, content, mimetype)`` tuples works on Celery, and the
    task receives lists there too. Anything else not JSON is still refused by the push."""
    if isinstance(value, (list, tuple)):
        return [_tuples_as_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _tuples_as_lists(v) for k, v in value.items()}
    return value


def check_call(job_class: type[CeleryJob], args: Any, kwargs: Any) -> tuple[list, dict]:
    """``args`` and ``kwargs`` as a list and a dict, bound to the function's signature
    (Celery's ``typing``) so a wrong call fails here, not on a worker."""
    if args is None:
        args = []
    if kwargs is None:
        kwargs = {}
    if isinstance(args, (str, bytes)) or not isinstance(args, Sequence):
        raise TypeError(f"{job_class.job_name}: args must be a list or tuple, not {args!r:.200}")
    if not isinstance(kwargs, Mapping):
        raise TypeError(f"{job_class.job_name}: kwargs must be a dict, not {kwargs!r:.200}")
    args, kwargs = _tuples_as_lists(list(args)), _tuples_as_lists(dict(kwargs))
    if job_class.typing:
        signature = job_class.__dict__.get("_signature")
        if signature is None:
            signature = job_class._signature = inspect.signature(job_class.fn)  # once per task: it costs ~10 us
        try:
            signature.bind(*([None] if job_class.bind else []), *args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{job_class.job_name}{signature}: {exc}") from None
    return args, kwargs


def apply_async(job_class: type[CeleryJob], args: Any = None, kwargs: Any = None,
                **options: Any) -> AsyncResult | None:
    """Push one call; the :class:`AsyncResult` of it, or ``None`` when a client middleware
    dropped the push (a unique job's duplicate)."""
    if settings.always_eager():
        return _eager(job_class, args, kwargs, options)
    args, kwargs = check_call(job_class, args, kwargs)
    setter_options = options_for(job_class, options)
    policy = _policy(options.get("retry"), options.get("retry_policy"))
    setter_options.setdefault("jid", payload.new_jid())  # the same id on every try of the push
    setter = Setter(job_class, setter_options, RESULT_RECORD)
    attempt = 0
    while True:
        try:
            jid = setter.perform_async(*args, **kwargs)
            break
        except _UNREACHABLE:
            if attempt >= policy["max_retries"]:
                raise
            time.sleep(min(policy["interval_start"] + policy["interval_step"] * attempt, policy["interval_max"]))
            attempt += 1
    if jid is None:
        return None
    config = context.config()
    target = shards.route(config, job_class=job_class, queue=setter_options.get("queue") or job_class.queue)
    return AsyncResult(jid, job_class.job_name, config=target if target is not config else None)


def _eager(job_class: type[CeleryJob], args: Any, kwargs: Any, options: Mapping[str, Any]) -> AsyncResult:
    """``CELERY_TASK_ALWAYS_EAGER``: the call runs here, as ``apply()``; with
    ``CELERY_TASK_EAGER_PROPAGATES`` its error is raised here too."""
    options_for(job_class, options)  # the same checks as a push: a bad option fails here too
    here = {k: options[k] for k in ("task_id", "queue", "soft_time_limit", "time_limit") if k in options}
    result = apply(job_class, args, kwargs, **here)
    if settings.eager_propagates() and result.failed():
        result.get(propagate=True)
    return result


def _policy(retry: Any, policy: Any) -> dict[str, float]:
    if not retry and not (retry is None and policy):
        return {**DEFAULT_POLICY, "max_retries": 0}
    if policy is not None and not isinstance(policy, Mapping):
        raise TypeError(f"retry_policy must be a dict, not {policy!r}")
    merged = {**DEFAULT_POLICY, **(policy or {})}
    unknown = set(merged) - set(DEFAULT_POLICY)
    if unknown:
        raise TypeError(f"retry_policy keys {sorted(unknown)} are unknown; known: {sorted(DEFAULT_POLICY)}")
    if merged["max_retries"] is None:
        merged["max_retries"] = 100  # Celery's "for ever", bounded: a push must return one day
    return merged


def apply(job_class: type[CeleryJob], args: Any = None, kwargs: Any = None, task_id: str | None = None,
          **options: Any) -> AsyncResult:
    """Run the call now, in this process (client and server middleware, a JSON round trip,
    retries at once); the returned result holds its value or its exception."""
    args, kwargs = check_call(job_class, args, kwargs)
    jid = payload.new_jid() if task_id is None else store.check_id(task_id)
    item_options = {"jid": jid, "result_ttl": job_class.result_ttl()}
    for name in ("queue", "soft_time_limit", "time_limit"):
        if options.get(name) is not None:
            item_options[name] = options[name]
    try:
        Setter(job_class, item_options).perform_inline(*args, **kwargs)
    except Exception:
        if (store.local(jid) or {}).get("state") != "failed":
            raise  # it never ran (a bad argument, a middleware): the caller's error
        # The task's own failure is kept with the result: .get() raises it, as Celery's apply() does.
    return AsyncResult(jid, job_class.job_name)
