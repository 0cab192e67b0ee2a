"""What a Wurk page answers while its Redis cannot be reached: a 503 naming the
server and the reason, instead of Django's 500 page with a ``ConnectionError``;
and the same for a Redis Cluster, which the pages cannot read yet (issue 46).

:meth:`WurkAdmin.wrap` and :meth:`WurkAdmin.api` run every view through
:func:`guarded`, so every page and JSON endpoint, built-in or a feature's,
answers the same way.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from urllib.parse import urlsplit, urlunsplit

import redis as redis_lib
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.translation import gettext as _

from ..errors import RedisClusterError

logger = logging.getLogger("wurk_django.admin")

#: Errors that mean "Redis is not there" (refused, unreachable, timed out, no Sentinel
#: primary), not a bug of the page: those stay 500s.
UNREACHABLE = (redis_lib.ConnectionError, redis_lib.TimeoutError)


def shown_url(url: str) -> str:
    """``url`` without its password, fit to show on a page."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = f"{user}@{host}" if user else host
        if parts.port is not None:
            netloc += f":{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    except ValueError:
        return "(unparsable Redis URL)"


def _url_of(shard: str | None) -> str:
    from .. import context

    try:
        # The shard's own config: for_shard starts from the settings' root config.
        return shown_url(context.config().for_shard(shard).redis_url)
    except Exception:  # a settings problem is not what this page is about
        return "(unknown)"


def message(shard: str | None, exc: BaseException) -> str:
    """``Redis unreachable at redis://host:6379/0: <reason>``."""
    return _("Redis unreachable at %(url)s: %(reason)s") % {"url": _url_of(shard), "reason": exc}


def guarded(request: HttpRequest, shard: str | None, run: Callable[[], HttpResponse], *,
            model_admin: object, as_json: bool) -> HttpResponse:
    """``run()``, rendered now (a template reads Redis while it renders), or the 503."""
    try:
        response = run()
        if hasattr(response, "render") and not getattr(response, "is_rendered", True):
            response.render()
        return response
    except UNREACHABLE as exc:
        text = message(shard, exc)
        logger.warning("admin page %s: %s", request.path, text)
        if as_json:
            return HttpResponse(json.dumps({"error": "redis_unreachable", "message": text}), status=503,
                                content_type="application/json")
        return _page(request, model_admin, text)
    except RedisClusterError as exc:
        # A Redis Cluster (issue 46): the pages cannot read it yet; say so, not a 500.
        text = str(exc)
        logger.warning("admin page %s: %s", request.path, text)
        if as_json:
            return HttpResponse(json.dumps({"error": "redis_cluster", "message": text}), status=503,
                                content_type="application/json")
        return _page(request, model_admin, text, title=_("Redis Cluster not supported yet"))


def _page(request: HttpRequest, model_admin: object, text: str, title: str | None = None) -> HttpResponse:
    try:
        site = model_admin.admin_site  # type: ignore[attr-defined]
        context = {**site.each_context(request), "title": title or _("Redis unreachable"), "wurk_message": text,
                   "opts": model_admin.opts}  # type: ignore[attr-defined]
        response = TemplateResponse(request, "wurk_django/admin/redis_unreachable.html", context, status=503)
        return response.render()
    except Exception:  # the admin chrome itself failed: still say what is wrong
        logger.exception("could not render the Redis-unreachable page")
        return HttpResponse(text, status=503, content_type="text/plain; charset=utf-8")
