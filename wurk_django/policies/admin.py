"""The admin's Policies page (issue 47 item 3): debounced jobs waiting to fire, and throttled
classes with their current slot and how many pushes were dropped.

A pending debounced job is an ordinary entry of the schedule set; the page finds them
through the index each debounced push writes (``keys.DEBOUNCES``: state key -> fire
time) and reads each one's state (the pending member and the burst's first push).
"Fire now" pushes the job to its queue (the Scheduled page's "Add to queue"), "Drop"
deletes it; either way the next push of its key starts a new burst.

On a Redis Cluster (issue 46 item 3) each queue has its own index and drop counters (in
its slot, with its schedule set): the page reads those of every known queue and merges
them; the actions go through the Scheduled page's merged view as on one server.

Throttled classes come from two places: the job classes of this process that declare
``throttle_for`` (their class-wide key), and the drop counters (``keys.THROTTLE_DROPS``,
one field per class and key, written only when a push is dropped).
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.urls import path
from django.utils.translation import gettext as _

from .. import canonical, payload, registry
from ..admin.common import args_text, redirect_back, redis, render, url, when
from ..admin.sets import apply, find, tell_refused
from ..api import JobRecord, ScheduledSet
from ..redis.cluster_layout import known_queues, layout_of
from ..text import to_text
from . import DEBOUNCE, DEBOUNCED_AT, MAX_WAIT, MAX_WAIT_FACTOR, THROTTLE

#: Index entries whose fire time passed this long ago are pruned when the page is read:
#: their job fired (the scheduler promotes a due job within seconds) or was dropped.
#: By score alone, so a new burst of the same key (always due in the future) is never
#: removed by a page read racing it.
PRUNE_AFTER = 3600
#: The most debounced jobs and throttled keys one page shows.
LIMIT = 200
ACTIONS = {"fire": "add_to_queue", "drop": "delete"}


def _text(value: Any) -> str | None:
    return None if value is None else to_text(value)


def _key_label(job: dict) -> str:
    """What the policy key is made of: the class's ``policy_key(job)`` when it has one."""
    hook = getattr(registry.registered().get(job.get("class")), "policy_key", None)
    if not callable(hook):
        return _("class and queue")
    try:
        return canonical.dumps(hook(job))
    except Exception as exc:  # the hook's own bug must not take the page down
        return f"policy_key failed: {type(exc).__name__}"


def _queues(conn: Any) -> list[str | None]:
    """Whose index and counters the page reads: on one server the fleet's one (``None``), on a
    Redis Cluster each known queue's own (issue 46 item 3: they are in the queue's slot)."""
    return known_queues(conn) if layout_of(conn).cluster else [None]


def debounced(conn: Any, now: float) -> list[dict[str, Any]]:
    """The pending debounced jobs, soonest first (at most :data:`LIMIT`); on a Redis Cluster
    read from every known queue's index, one pipeline (one round trip per primary) a step."""
    layout = layout_of(conn)
    queues = _queues(conn)
    pipe = conn.pipeline(transaction=False)
    for queue in queues:
        index = layout.debounces(queue or "")
        pipe.zremrangebyscore(index, "-inf", now - PRUNE_AFTER)
        pipe.zrange(index, 0, LIMIT - 1, withscores=True)
    replies = pipe.execute()
    pending = sorted(((float(score), _text(state), queue) for queue, found in zip(queues, replies[1::2], strict=True)
                      for state, score in found), key=lambda item: item[0])[:LIMIT]
    states = [(state, queue) for _score, state, queue in pending]
    pipe = conn.pipeline(transaction=False)
    for state, _queue in states:
        pipe.hmget(state, "member", "first")
    found = pipe.execute()
    pipe = conn.pipeline(transaction=False)
    for (member, _first), (_state, queue) in zip(found, states, strict=True):
        pipe.zscore(layout.schedule(queue or ""), member if member is not None else b"")
    scores = pipe.execute()
    rows = []
    for (state, _queue), (member, first), score in zip(states, found, scores, strict=True):
        if member is None or score is None:
            continue  # fired, dropped, or the state expired: nothing pending
        record = JobRecord(member.decode("utf-8", "replace"))
        job = record.item if not record.parse_error else {}
        quiet = _float(job.get(DEBOUNCE))
        max_wait = _float(job.get(MAX_WAIT)) or (quiet * MAX_WAIT_FACTOR if quiet else None)
        first_at = _float(first)
        rows.append({
            "state": state,
            # debounce:<digest> on one server, {q:<queue>}:debounce:<digest> on a cluster
            "digest": state.rpartition(":")[2],
            "key": entry_key_of(score, record.jid),
            "klass": record.display_class,
            "queue": record.queue,
            "jid": record.jid,
            "args": args_text(record),
            "policy_key": _key_label(job),
            "quiet": quiet,
            "max_wait": max_wait,
            "first": when(first_at),
            "last": when(_float(job.get(DEBOUNCED_AT))),
            "cap": when(first_at + max_wait) if first_at and max_wait else None,
            "fires": when(float(score)),
            "capped": bool(first_at and max_wait and float(score) >= first_at + max_wait - 0.001),
        })
    return sorted(rows, key=lambda r: r["fires"])


def entry_key_of(score: float, jid: str | None) -> str:
    return f"{payload.score(float(score))}-{jid or ''}"


def _float(value: Any) -> float | None:
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def throttled(conn: Any, now: float) -> list[dict[str, Any]]:
    """Each throttled class and key: its period, the current slot's holder, the drops counted."""
    found: dict[str, dict[str, Any]] = {}
    for name, job_class in sorted(registry.registered().items()):
        period = getattr(job_class, THROTTLE, None)
        if period is None or callable(getattr(job_class, "policy_key", None)):
            continue  # no throttle, or keyed per job: its keys show once one drops a push
        period = period.total_seconds() if hasattr(period, "total_seconds") else period
        context = [name, getattr(job_class, "queue", None) or "default"]
        found[canonical.sha256_hex(context)] = {"klass": name, "queue": context[1], "key": _("class and queue"),
                                                "period": float(period), "dropped": 0}
    layout = layout_of(conn)
    queues = _queues(conn)
    pipe = conn.pipeline(transaction=False)
    for queue in queues:
        pipe.hgetall(layout.throttle_drops(queue or ""))
    counted = [item for counters in pipe.execute() for item in counters.items()]
    for field, count in counted[:LIMIT]:
        try:
            data = json.loads(to_text(field))
            context, period = data["context"], float(data["period"])
            name, queue = context[0], context[1]
        except (ValueError, KeyError, TypeError, IndexError):
            continue  # written by hand or by another version: not ours to read
        digest = canonical.sha256_hex(context)
        row = found.setdefault(digest, {"klass": name, "queue": queue, "period": period, "dropped": 0,
                                        "key": canonical.dumps(context[2]) if len(context) > 2 else
                                        _("class and queue")})
        row["dropped"] += int(count)
    rows = list(found.items())
    pipe = conn.pipeline(transaction=False)
    for digest, row in rows:
        row["slot"] = int(now // row["period"])
        pipe.get(layout.throttle_slot(row["queue"], digest, row["slot"]))
    for (_digest, row), holder in zip(rows, pipe.execute(), strict=True):
        row["holder"] = _text(holder)
        row["slot_start"] = datetime.fromtimestamp(row["slot"] * row["period"], tz=UTC)
        row["slot_end"] = datetime.fromtimestamp((row["slot"] + 1) * row["period"], tz=UTC)
    return [row for _digest, row in sorted(rows, key=lambda item: (item[1]["klass"], item[1]["key"]))]


def _act(request: HttpRequest) -> None:
    action, key = request.POST.get("action"), request.POST.get("key", "")
    if action not in ACTIONS or not key:
        messages.error(request, _("Unknown action."))
        return
    try:
        entry = find(ScheduledSet(), key)
    except Exception:  # a malformed key (Http404 from the parser): nothing to act on
        entry = None
    if entry is None or entry.parse_error or entry.get(DEBOUNCE) is None:
        messages.warning(request, _("That debounced job is no longer pending (it fired, or a later push took its "
                                    "place)."))
        return
    refused: list[str] = []
    if apply(entry, ACTIONS[action], refused):
        if action == "fire":
            messages.success(request, _("Job %(jid)s is on its queue; the next push of its key starts a new burst.")
                             % {"jid": entry.jid})
        else:
            messages.success(request, _("Job %(jid)s was dropped; the next push of its key starts a new burst.")
                             % {"jid": entry.jid})
    elif refused:
        tell_refused(request, refused)
    else:
        messages.warning(request, _("That debounced job is no longer pending (it fired, or a later push took its "
                                    "place)."))


def index(request: HttpRequest, model_admin: Any) -> HttpResponse:
    # On a Redis Cluster the pages' client is a RedisCluster, whose layout names the keys.
    if request.method == "POST":
        _act(request)
        return redirect_back(request, url(request, "wurk_policies"))
    conn, now = redis(), time.time()
    context = {"debounced": debounced(conn, now), "throttled": throttled(conn, now), "limit": LIMIT,
               "scheduled_url": url(request, "wurk_set", kind="scheduled")}
    return render(request, model_admin, "policies.html", context, section="policies", title=_("Policies"))


def urls(model_admin: Any) -> list:
    return [path("policies/", model_admin.wrap(index, methods=model_admin.POST), name="wurk_policies")]
