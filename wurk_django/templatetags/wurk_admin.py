"""Small display filters for the Wurk admin pages. Numbers come out in the reader's
format (``1,5 GB`` in French), as Django's own filters write them."""

from __future__ import annotations

from django import template
from django.utils.formats import number_format
from django.utils.translation import pgettext

register = template.Library()


def _number(value: float, decimals: int) -> str:
    return number_format(round(value, decimals), decimals)


@register.filter
def wurk_kb(value: object) -> str:
    """Kilobytes (heartbeat ``rss``) as a short human size: ``512 KB``, ``1.5 GB``."""
    try:
        size = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    for unit in ("KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{_number(size, 0)} {unit}" if unit == "KB" else f"{_number(size, 1)} {unit}"
        size /= 1024
    return ""


@register.filter
def wurk_seconds(value: object) -> str:
    """A latency: ``0.4 s``, ``42 s``, ``3 min``, ``2.5 h``, ``4 d``."""
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    if seconds < 10:
        return f"{_number(seconds, 1)} s"
    if seconds < 60:
        return f"{_number(seconds, 0)} s"
    if seconds < 3600:
        return f"{_number(seconds / 60, 0)} min"
    if seconds < 86400:
        return f"{_number(seconds / 3600, 1)} h"
    days = pgettext("abbreviation of days", "d")
    return f"{_number(seconds / 86400, 0)} {days}"


@register.simple_tag
def wurk_breadcrumbs_are_a_list() -> bool:
    """Whether this Django's admin writes its breadcrumbs as ``<ol class="breadcrumbs">``
    (Django 6.1 and later) rather than ``<div class="breadcrumbs">`` with ``›`` between the
    links (5.2, 6.0): each version's stylesheet styles only its own markup."""
    import django

    return django.VERSION >= (6, 1)
