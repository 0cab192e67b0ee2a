"""Scheduled, Retries and Dead: the three job sorted sets (CORE-182, CORE-185, CORE-195..197).

Lists read one ``ZRANGE`` window by rank per page, so a page costs the same
with 100 entries or 100 000. A ``substr`` filter walks the set by rank, a chunk
at a time, and keeps only the current page's matches. "All" actions pop
entries one by one on the server (``ZPOPMIN``) or ``UNLINK`` the set, never
loading it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy, ngettext

from .. import payload
from ..api import DeadSet, JobSet, NotPushed, RetrySet, ScheduledSet, SortedEntry, bulk
from ..api.revoke import MARKED, revoke
from ..client.push import Client
from ..unique.unlock import digest_of, holder, release_digest
from . import bulk as bulk_views
from .common import (
    Page,
    args_text,
    is_task,
    keep_query,
    notify,
    page_params,
    pretty,
    redirect_back,
    redis,
    render,
    url,
)


@dataclass(frozen=True)
class Kind:
    title: Any  # lazy translations: a Kind is built at import, shown in the reader's language
    set_class: type[JobSet]
    newest_first: bool  # Dead lists the latest deaths first; the others the next due first
    when_label: Any
    actions: tuple[str, ...]  # per job and bulk
    all_actions: tuple[str, ...]


KINDS: dict[str, Kind] = {
    "scheduled": Kind(gettext_lazy("Scheduled"), ScheduledSet, False, gettext_lazy("Runs at"),
                      ("add_to_queue", "delete"), ("add_to_queue", "delete")),
    "retries": Kind(gettext_lazy("Retries"), RetrySet, False, gettext_lazy("Next retry"),
                    ("retry", "add_to_queue", "delete", "kill"), ("retry", "delete", "kill")),
    "dead": Kind(gettext_lazy("Dead"), DeadSet, True, gettext_lazy("Died at"), ("retry", "add_to_queue", "delete"),
                 ("retry", "delete")),
}
#: Kinds whose job page has Cancel (a revoke: the dead set, naming who).
CANCELLABLE = ("scheduled", "retries")
# Each label says what the action does to the job (issue 45 item 3): "Delete" and "Kill" read
# alike, one erases the job, the other files it in Dead where it can still be retried.
LABELS = {"retry": gettext_lazy("Retry now"), "add_to_queue": gettext_lazy("Add to queue"),
          "delete": gettext_lazy("Delete for good"), "kill": gettext_lazy("Move to Dead"),
          "cancel": gettext_lazy("Revoke")}
ALL_LABELS = {"retry": gettext_lazy("Retry all"), "add_to_queue": gettext_lazy("Enqueue all"),
              "delete": gettext_lazy("Delete all for good"), "kill": gettext_lazy("Move all to Dead")}
#: The actions that lose or end a job, set apart from the others on the page and confirmed
#: before they run (the question a browser asks; the "… all" ones have a confirmation page).
CONFIRMS = {
    "delete": gettext_lazy("Delete for good? The job is removed from Redis: it never runs and no copy is kept."),
    "kill": gettext_lazy("Move to Dead? The job stops retrying and is filed in Dead as failed (its death "
                         "handlers run); it can still be retried from there."),
    "cancel": gettext_lazy("Revoke this job? It never runs: it goes to Dead marked as revoked by you."),
}


def split_actions(actions: list[tuple[str, Any]]) -> tuple[list[tuple[str, Any]], list[tuple[str, Any, Any]]]:
    """``actions`` as ``(safe, destructive)``; a destructive one carries its confirmation question."""
    safe = [(a, label) for a, label in actions if a not in CONFIRMS]
    destructive = [(a, label, CONFIRMS[a]) for a, label in actions if a in CONFIRMS]
    return safe, destructive


def _kind(kind: str) -> Kind:
    try:
        return KINDS[kind]
    except KeyError:
        raise Http404(_("no such set")) from None


def read_page(job_set: JobSet, number: int, count: int, *, newest_first: bool) -> tuple[int, list[SortedEntry]]:
    """``(size, entries)``: one ``ZCARD`` and one ``ZRANGE`` by rank (on a Redis Cluster,
    per known queue's set, merged: :meth:`JobSet.window`)."""
    return job_set.window((number - 1) * count, count, desc=newest_first)


#: Entries read per round trip while a filter walks a set.
SEARCH_CHUNK = 1000


def search_page(job_set: JobSet, substr: str, number: int, count: int, *,
                newest_first: bool) -> tuple[int, list[SortedEntry]]:
    """``(matches, entries)`` for entries whose JSON contains ``substr``.

    The set is read in display order, ``SEARCH_CHUNK`` entries per ``ZRANGE`` by
    rank (per queue's set on a Redis Cluster, merged); every match is counted but
    only the current page's are kept, so memory stays bounded by one chunk (per
    set) and one page, however deep the page.
    """
    needle = substr.encode("utf-8")
    first, last = (number - 1) * count, number * count
    matches = 0
    kept: list[SortedEntry] = []
    for entry in job_set.walk(SEARCH_CHUNK, desc=newest_first):
        if needle in entry.value:
            if first <= matches < last:
                kept.append(entry)
            matches += 1
    return matches, kept


def entry_key(entry: SortedEntry) -> str:
    """``"<score>-<jid>"``; an unreadable member has no jid and ends in ``-``."""
    return f"{payload.score(entry.score)}-{entry.jid or ''}"


def row(entry: SortedEntry) -> dict[str, Any]:
    return {
        "key": entry_key(entry),
        "at": entry.at,
        "queue": entry.queue,
        "klass": entry.display_class,
        "jid": entry.jid,
        "args": args_text(entry),
        "task": is_task(entry),
        "retry_count": entry.get("retry_count"),
        "error": f"{entry.error_class}: {entry.error_message}" if entry.error_class else "",
        "unreadable": entry.parse_error,
        "deadline": deadline_of(entry),
    }


def deadline_of(record: Any) -> datetime | None:
    """A job's ``deadline`` (issue 47 item 5) as a time, or None (none, or unreadable)."""
    value = None if record.parse_error else record.get("deadline")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(value, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


def parse_key(key: str) -> tuple[float, str | None]:
    """``"<score>-<jid>"`` split at the first ``-`` (CORE-182); 404 when malformed."""
    score, sep, jid = key.partition("-")
    try:
        value = float(score)
    except ValueError:
        raise Http404(_("bad job key")) from None
    if not sep:
        raise Http404(_("bad job key"))
    return value, (jid or None)


def find(job_set: JobSet, key: str) -> SortedEntry | None:
    score, jid = parse_key(key)
    for entry in job_set.fetch(score):
        if entry.jid == jid:
            return entry
    return None


def apply(entry: SortedEntry, action: str, refused: list[str] | None = None) -> bool:
    """Run one action on one entry; False if it was gone or cannot be moved. Why a push
    was stopped (a unique job's lock held by another job) goes to ``refused``."""
    try:
        if action == "retry":
            return entry.retry()
        if action == "add_to_queue":
            return entry.add_to_queue()
        if action == "delete":
            return entry.delete()
        if action == "kill":
            return entry.kill()
    except NotPushed as exc:
        if refused is not None:
            refused.append(str(exc))
        return False
    except ValueError:  # an unreadable payload cannot be pushed anywhere
        return False
    return False


def tell_refused(request: HttpRequest, refused: list[str]) -> None:
    """Say why pushes were stopped: each reason for a few, then how many more."""
    for reason in refused[:5]:
        messages.warning(request, reason)
    if len(refused) > 5:
        more = len(refused) - 5
        messages.warning(request, ngettext("%(count)d more job was not pushed for the same kind of reason.",
                                           "%(count)d more jobs were not pushed for the same kind of reason.",
                                           more) % {"count": more})


def index(request: HttpRequest, model_admin: Any, kind: str) -> HttpResponse:
    spec = _kind(kind)
    job_set = spec.set_class()
    if request.method == "POST":
        return _bulk(request, spec, job_set, kind)
    number, count = page_params(request)
    substr = request.GET.get("substr", "").strip()
    if substr:
        total, entries = search_page(job_set, substr, number, count, newest_first=spec.newest_first)
    else:
        total, entries = read_page(job_set, number, count, newest_first=spec.newest_first)
    page = Page(number=number, count=count, total=total, items=[row(e) for e in entries],
                base_query=keep_query(request, "substr"))
    context = {
        "kind": kind,
        "spec": spec,
        "page": page,
        "substr": substr,
        "actions": [(a, LABELS[a]) for a in spec.actions],
        "safe_actions": split_actions([(a, LABELS[a]) for a in spec.actions])[0],
        "destructive_actions": split_actions([(a, LABELS[a]) for a in spec.actions])[1],
        "all_actions": [(a, ALL_LABELS[a]) for a in spec.all_actions],
    }
    return render(request, model_admin, "set.html", context, section=kind, title=spec.title)


def _bulk(request: HttpRequest, spec: Kind, job_set: JobSet, kind: str) -> HttpResponse:
    action = request.POST.get("action")
    back = url(request, "wurk_set", kind=kind)
    if action not in spec.actions:
        messages.error(request, _("Unknown action."))
        return redirect_back(request, back)
    keys = request.POST.getlist("key")
    done = failed = 0
    refused: list[str] = []
    for key in keys:
        entry = find(job_set, key)
        if entry is not None and apply(entry, action, refused):
            done += 1
        else:
            failed += 1
    notify(request, done, LABELS[action], failed=failed - len(refused))
    tell_refused(request, refused)
    return redirect_back(request, back)


def enqueue_all(job_set: JobSet) -> int:
    """Push every entry to its queue now, unchanged (scheduled "Enqueue all").

    Pops one member at a time (``ZPOPMIN``; per queue's set on a Redis Cluster),
    bounded by the starting size; unreadable members and those the client rejects
    are put back.
    """
    client = Client()
    pushed = 0
    keep: dict[str, dict[bytes, float]] = {}
    try:
        for raw, score, name in job_set.pop_each():
            try:
                job = payload.loads(raw)
                if not isinstance(job, dict):
                    raise ValueError("not a job")
                job.pop("at", None)  # run now, not at the old time
                client.push(job)
            except ValueError:
                keep.setdefault(name, {})[raw] = score
                continue
            except BaseException:
                keep.setdefault(name, {})[raw] = score  # put back below, then fail loudly
                raise
            pushed += 1
    finally:
        job_set.put_back(keep)
    return pushed


def all_action(request: HttpRequest, model_admin: Any, kind: str, action: str) -> HttpResponse:
    """GET: a confirmation page (changes nothing). POST: do it to the whole set (DJ-053)."""
    spec = _kind(kind)
    if action not in spec.all_actions:
        raise Http404(_("no such action"))
    job_set = spec.set_class()
    back = url(request, "wurk_set", kind=kind)
    # On a Redis Cluster the set is many queues' sets: the background job works through
    # each queue's own set in turn (api/bulk.py).
    background = action in bulk.ACTIONS
    if request.method != "POST":
        context = {"kind": kind, "spec": spec, "action": action, "label": ALL_LABELS[action],
                   "size": job_set.size, "back": back,
                   "in_background": background and job_set.size > bulk_views.SYNC_LIMIT}
        title = _("%(set)s: confirm") % {"set": spec.title}
        return render(request, model_admin, "confirm.html", context, section=kind, title=title)
    if background and job_set.size > bulk_views.SYNC_LIMIT:
        # Too many for one request: a job of our own works through the set and the
        # progress page follows it.
        token = bulk.start(job_set.name, action, redis=redis())
        return HttpResponseRedirect(url(request, "wurk_bulk", token=token))
    if action == "delete":
        size = job_set.size
        job_set.clear()
        done = size
    elif action == "retry":
        refused: list[str] = []
        done = job_set.retry_all(refused)
        tell_refused(request, refused)
    elif action == "kill":
        # A kill from the dashboard is a death like any other: handlers and ``job_died``
        # run for each job (a django.tasks result turns FAILED), with JobKilled as the cause.
        done = job_set.kill_all(notify_failure=True)
    else:
        done = enqueue_all(job_set)
    notify(request, done, ALL_LABELS[action])
    return redirect_back(request, back)


def detail(request: HttpRequest, model_admin: Any, kind: str, key: str) -> HttpResponse:
    spec = _kind(kind)
    job_set = spec.set_class()
    entry = find(job_set, key)
    back = url(request, "wurk_set", kind=kind)
    if request.method == "POST":
        action = request.POST.get("action")
        refused: list[str] = []
        digest = digest_of(entry.item) if entry is not None else None
        if action == "release_lock" and digest is not None:
            released = release_digest(redis(), digest)
            text = _("Unique lock released.") if released else _("The unique lock was already free.")
            messages.success(request, text)
            return redirect_back(request, url(request, "wurk_set_job", kind=kind, key=key))
        if action == "cancel" and kind in CANCELLABLE:
            if entry is not None and revoke(entry.jid or "", by=request.user.get_username() or None) != MARKED:
                messages.success(request, _("Job cancelled: it is in the dead set."))
            else:
                messages.warning(request, _("That job is no longer there (or could not be moved)."))
            return redirect_back(request, back)
        if action not in spec.actions:
            messages.error(request, _("Unknown action."))
        elif entry is not None and apply(entry, action, refused):
            notify(request, 1, LABELS[action])
        elif refused:
            tell_refused(request, refused)
        else:
            messages.warning(request, _("That job is no longer there (or could not be moved)."))
        return redirect_back(request, back)
    if entry is None:
        return render(request, model_admin, "job_gone.html", {"kind": kind, "spec": spec, "back": back},
                      section=kind, title=_("%(set)s: job not found") % {"set": spec.title}, status=404)
    fields = []
    lock_actions: list[tuple[str, str]] = []
    digest = digest_of(entry.item)
    if digest is not None:
        held_by = holder(redis(), digest)
        state = _("held by jid %(jid)s") % {"jid": held_by} if held_by else _("free")
        fields.append((_("unique lock"), f"{digest} - {state}"))
        if held_by:
            lock_actions.append(("release_lock", _("Release unique lock")))
    for name, value in entry.item.items():
        if name == "error_backtrace":
            continue  # shown decoded below
        if name == "args":
            value = entry.display_args  # masks encrypted arguments
        shown = pretty(value)
        seconds = payload.epoch_seconds(value) if name.endswith("_at") or name == "deadline" else None
        if seconds is not None:
            shown += f"  ({datetime.fromtimestamp(seconds, tz=UTC):%Y-%m-%d %H:%M:%S} UTC)"
        fields.append((name, shown))
    actions = ([(a, LABELS[a]) for a in spec.actions] + lock_actions
               + ([("cancel", LABELS["cancel"])] if kind in CANCELLABLE and entry.jid else []))
    context = {
        "kind": kind,
        "spec": spec,
        "entry": row(entry),
        "fields": fields,
        "raw": entry.value.decode("utf-8", "replace") if entry.parse_error else None,
        "backtrace": entry.error_backtrace,
        "actions": actions,
        "safe_actions": split_actions(actions)[0],
        "destructive_actions": split_actions(actions)[1],
        "back": back,
        # A tracked job (issue 47 item 2): a link to its status page, with its progress and errors.
        "tracked": isinstance(entry.item, dict) and "track" in entry.item,
    }
    title = _("%(set)s: %(job_class)s") % {"set": spec.title, "job_class": entry.display_class}
    return render(request, model_admin, "job.html", context, section=kind, title=title)
