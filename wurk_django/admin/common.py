"""What every Wurk page shares: context, paging, display helpers."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar
from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.utils.translation import ngettext

from .. import context as job_context
from .. import payload
from ..admin_pages import pages
from ..api import Stats
from .access import can_manage

DEFAULT_COUNT = 25  # rows a list page shows unless the query asks for another count (CORE-242)
MAX_COUNT = 200  # the most rows one page may ask for, so a page never loads a whole set (DJ-055)
ARGS_LIMIT = 120  # characters of arguments shown in a list row

T = TypeVar("T")

def url(request: HttpRequest, view_name: str, /, **kwargs: Any) -> str:
    """Reverse a Wurk page in the admin site serving this request."""
    return reverse(f"admin:{view_name}", kwargs=kwargs or None, current_app=request.current_app)


def summary(stats: Stats | None = None) -> dict[str, int]:
    """The counts in the bar on top of every page (CORE-180)."""
    stats = stats or Stats()
    return {
        "processed": stats.processed,
        "failed": stats.failed,
        "busy": stats.workers_size,
        "enqueued": stats.enqueued,
        "retries": stats.retry_size,
        "scheduled": stats.scheduled_size,
        "dead": stats.dead_size,
    }


def render(request: HttpRequest, model_admin: Any, template: str, context: dict[str, Any],
           *, section: str, title: str, status: int = 200) -> HttpResponse:
    """A page in the admin chrome, with the tabs and summary bar."""
    from . import eviction_banner, shard_select

    stats = context.pop("stats", None)
    nav = [
        {"key": p.key, "label": p.label, "url": url(request, p.url_name, **p.url_kwargs), "active": p.key == section}
        for p in pages() if p.tab
    ]
    site_context = model_admin.admin_site.each_context(request)
    if "available_apps" in site_context:
        site_context["available_apps"] = sidebar(request, site_context["available_apps"], nav, section)
    full = {
        **site_context,
        "title": title,
        "opts": model_admin.opts,
        "wurk_nav": nav,
        "wurk_section": section,
        "wurk_summary": summary(stats),
        "wurk_can_manage": can_manage(request),
        "wurk_stats_url": url(request, "wurk_stats"),
        "wurk_poll": request.GET.get("poll") == "true",
        "wurk_poll_url": _toggle_poll(request),
        "wurk_eviction": eviction_banner.notice(),
        **shard_select.context(request),
        **context,
    }
    nonce = csp_nonce(request)
    if nonce:
        # Django 6's admin templates read ``csp_nonce`` too ({% csp_nonce_attr %}).
        full.setdefault("csp_nonce", nonce)
    return TemplateResponse(request, f"wurk_django/admin/{template}", full, status=status)


def sidebar(request: HttpRequest, apps: list[dict[str, Any]], nav: list[dict[str, Any]],
            section: str) -> list[dict[str, Any]]:
    """The admin's sidebar list with the Wurk entries leading straight to their pages and only
    the current page's entry marked as current.

    Django marks an entry current when its URL is a substring of the request's path. Every
    Wurk page lives under the dashboard's URL, so "Dashboard" would read as current on all
    of them: its link gets a fragment there (the same page, and no path contains ``#``).
    """
    urls = {item["key"]: item["url"] for item in nav}
    out = []
    for app in apps:
        if app.get("app_label") != "wurk_django":
            out.append(app)
            continue
        entries = []
        for entry in app.get("models", []):
            key = getattr(entry.get("model"), "page_key", None)
            if key in urls:
                link = urls[key]
                if key != section and link in request.path:
                    link += "#wurk-root"
                entry = {**entry, "admin_url": link}
            entries.append(entry)
        out.append({**app, "models": entries})
    return out


def csp_nonce(request: HttpRequest) -> str:
    """This response's Content-Security-Policy nonce, from Django 6's CSP middleware or the
    ``django-csp`` package; ``""`` when neither runs. Reading it makes it part of the header."""
    # Not ``a or b``: Django's lazy nonce is falsy until first turned into text.
    nonce = getattr(request, "_csp_nonce", None)
    if nonce is None:
        nonce = getattr(request, "csp_nonce", None)
    return str(nonce) if nonce is not None else ""


def _toggle_poll(request: HttpRequest) -> str:
    """The current page's URL with live polling switched the other way (``?poll=true``)."""
    params = request.GET.copy()
    if params.get("poll") == "true":
        params.pop("poll")
    else:
        params["poll"] = "true"
    query = params.urlencode()
    return request.path + (f"?{query}" if query else "")


def redirect_back(request: HttpRequest, fallback: str) -> HttpResponseRedirect:
    """Back to the page the form was on (``next``), if it is on this site."""
    target = request.POST.get("next") or request.GET.get("next")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()},
                                                 require_https=request.is_secure()):
        return HttpResponseRedirect(target)
    return HttpResponseRedirect(fallback)


def notify(request: HttpRequest, done: int, what: str, *, failed: int = 0) -> None:
    """Say how an action went: ``what`` is the action's (translated) label."""
    if done:
        messages.success(request, ngettext("%(action)s: %(count)d job.", "%(action)s: %(count)d jobs.", done)
                         % {"action": what, "count": done})
    if failed:
        messages.warning(request, ngettext("%(count)d job could not be changed (already gone, or unreadable).",
                                           "%(count)d jobs could not be changed (already gone, or unreadable).",
                                           failed) % {"count": failed})
    if not done and not failed:
        messages.info(request, _("Nothing to do: no matching job."))


# -- paging ------------------------------------------------------------------------


def _int_param(request: HttpRequest, name: str, default: int, low: int, high: int | None = None) -> int:
    try:
        value = int(request.GET.get(name, default))
    except (TypeError, ValueError):
        value = default
    value = max(value, low)
    return min(value, high) if high is not None else value


@dataclass
class Page:
    """One window of a long list; ``items`` were read with a ranged command."""

    number: int
    count: int
    total: int
    items: list = field(default_factory=list)
    base_query: dict[str, str] = field(default_factory=dict)

    @property
    def start(self) -> int:
        """Index (0-based) of the first row of this page."""
        return (self.number - 1) * self.count

    @property
    def pages(self) -> int:
        return max(math.ceil(self.total / self.count), 1)

    def link(self, number: int) -> str:
        return "?" + urlencode({**self.base_query, "page": number, "count": self.count})

    def links(self) -> list[dict[str, Any]]:
        """First, last and two either side of the current page; ``None`` marks a gap."""
        wanted = sorted({1, self.pages, *range(self.number - 2, self.number + 3)} & set(range(1, self.pages + 1)))
        out: list[dict[str, Any]] = []
        previous = 0
        for n in wanted:
            if n - previous > 1:
                out.append({"gap": True})
            out.append({"number": n, "url": self.link(n), "current": n == self.number})
            previous = n
        return out


def page_params(request: HttpRequest, default: int = DEFAULT_COUNT) -> tuple[int, int]:
    """``(page, count)`` from the query string: count ``default`` (25) when not given,
    at most 200 (DJ-055)."""
    return _int_param(request, "page", 1, 1), _int_param(request, "count", default, 1, MAX_COUNT)


def keep_query(request: HttpRequest, *names: str) -> dict[str, str]:
    return {n: request.GET[n] for n in names if request.GET.get(n)}


# -- display -----------------------------------------------------------------------


def _json_text(value: Any) -> str:
    try:
        return payload.dumps(value).decode("utf-8")
    except TypeError:
        return repr(value)


def short_args(args: list, limit: int = ARGS_LIMIT, kwargs: dict | None = None) -> str:
    """Arguments as compact JSON (keyword arguments as ``name=<JSON>``), cut at ``limit``
    characters. Escaping is the template's job: this returns plain text."""
    parts = [_json_text(arg) for arg in args]
    parts += [f"{name}={_json_text(value)}" for name, value in (kwargs or {}).items()]
    text = ", ".join(parts)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def task_shaped(record: Any) -> bool:
    """A ``django.tasks`` task pushed by :class:`wurk_django.tasks.WurkBackend`:
    ``args`` is ``[positional list, keyword dict]`` and ``task`` holds its options."""
    item = record.item if isinstance(record.item, dict) else {}
    args = item.get("args")
    return (isinstance(item.get("task"), dict) and isinstance(args, list) and len(args) == 2
            and isinstance(args[0], list) and isinstance(args[1], dict))


def is_task(record: Any) -> bool:
    """A task whose result the Tasks page can show (it exists where wurk_django.tasks.compat found a Tasks framework)."""
    from ..tasks.compat import AVAILABLE

    return AVAILABLE and task_shaped(record)


def call_text(name: str, args: list, kwargs: dict, limit: int = ARGS_LIMIT) -> str:
    """``add(2, 40, round=True)``: how the task was called, as Python would write it."""
    parts = [repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()]
    text = f"{name}({', '.join(parts)})"
    return text if len(text) <= limit else text[: limit - 2] + "…)"


def args_text(record: Any, limit: int = ARGS_LIMIT) -> str:
    """The Arguments column: a task as a call (``add(2, 40)``), any other job as its
    arguments in compact JSON, a Celery-style call's keyword arguments included."""
    if task_shaped(record) and not payload.truthy(record.item.get("encrypt")):
        name = str(record.item.get("wrapped") or record.klass).rsplit(".", 1)[-1]
        return call_text(name, record.item["args"][0], record.item["args"][1], limit)
    item = record.item if isinstance(record.item, dict) else {}
    kwargs = item.get("kwargs")
    if not isinstance(kwargs, dict) or payload.truthy(item.get("encrypt")):
        kwargs = None  # a Celery-style call keeps its keyword arguments beside ``args``
    return short_args(record.display_args, limit, kwargs=kwargs)


def pretty(value: Any) -> str:
    """A payload value for the detail page (indented JSON for lists and dicts)."""
    import json

    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
    except (TypeError, ValueError):
        return repr(value)


def when(seconds: float | None) -> datetime | None:
    return datetime.fromtimestamp(seconds, tz=UTC) if seconds else None


def unreadable(key: str, exc: BaseException) -> dict[str, Any]:
    """A list row standing for a record the page could not read: its Redis key and why."""
    return {"unreadable": True, "key": key, "reason": f"{type(exc).__name__}: {exc}"}


def each_row(items: Iterable[T], build: Callable[[T], dict[str, Any]], key: Callable[[T], str]) -> list[dict[str, Any]]:
    """``build(item)`` for every item; an item it fails on (a record written by hand, by an
    older or foreign version) becomes an :func:`unreadable` row naming ``key(item)``, so
    one bad record never takes the whole list page down. The row keeps the ``item``."""
    rows = []
    for item in items:
        try:
            rows.append(build(item))
        except Exception as exc:
            rows.append({**unreadable(key(item), exc), "item": item})
    return rows


def redis():
    """The Redis the pages read: the process-wide client, or on a Redis Cluster the
    process's ``RedisCluster`` (issue 46 item 3; the pages name keys through its layout)."""
    from ..redis.layout_client import layout_client

    return layout_client()


def not_on_cluster(feature: str) -> None:
    """Raise :class:`~wurk_django.errors.RedisClusterError` naming ``feature`` when the pages'
    Redis is a cluster: for a page whose feature does not run there yet, which would read
    one-server keys nobody writes on a cluster (the page then answers 503 with that line)."""
    from ..redis import cluster
    from ..redis.layout_client import is_cluster

    if is_cluster(redis()):
        raise cluster.not_yet(feature, job_context.config().redis_url)


def servers(client: Any = None) -> list[Any]:
    """One plain client per server the pages' ``INFO`` reads: ``[client]`` on one server,
    each primary's own client on a Redis Cluster (``INFO`` is per node)."""
    from ..redis.layout_client import is_cluster

    client = redis() if client is None else client
    if is_cluster(client):
        return [client.get_redis_connection(node) for node in client.get_primaries()]
    return [client]
