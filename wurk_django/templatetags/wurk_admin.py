"""Small display filters for the Wurk admin pages."""

from __future__ import annotations

from django import template

register = template.Library()


@register.filter
def wurk_kb(value: object) -> str:
    """Kilobytes (heartbeat ``rss``) as a short human size: ``512 KB``, ``1.5 GB``."""
    try:
        size = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""
    for unit in ("KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "KB" else f"{size:.1f} {unit}"
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
        return f"{seconds:.1f} s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} d"
