"""Who may see and change the Wurk pages: permissions, read-only mode, the authorize hook
and the API bearer token (DJ-051, DJ-056). Imports no page, so every page may use it."""

from __future__ import annotations

import hmac

from django.http import HttpRequest
from django.utils.module_loading import import_string

from .. import context

VIEW_PERMISSION = "wurk_django.view_dashboard"
MANAGE_PERMISSION = "wurk_django.manage_jobs"


def can_view(request: HttpRequest) -> bool:
    user = request.user
    return bool(user.is_active and user.is_staff and user.has_perm(VIEW_PERMISSION))


def read_only() -> bool:
    return bool(context.config().admin_read_only)


def can_manage(request: HttpRequest) -> bool:
    """Whether this request may change anything (buttons are hidden otherwise)."""
    user = request.user
    return bool(can_view(request) and user.has_perm(MANAGE_PERMISSION) and not read_only())


#: Set on a request let in by ``WURK["API_TOKEN"]`` (True) or by a staff session (False),
#: so ``ADMIN_AUTHORIZE`` can tell the two apart: a token request has an anonymous ``user``.
TOKEN_ATTRIBUTE = "wurk_api_token"


def authorize_hook(request: HttpRequest) -> bool:
    """``WURK["ADMIN_AUTHORIZE"](request, method, path)``; no hook means allowed (DJ-051).

    Asked for every Wurk view once the other checks passed, the token's JSON
    included; ``request.wurk_api_token`` says which way a JSON request came in."""
    hook = context.config().admin_authorize
    if not hook:
        return True
    if isinstance(hook, str):
        hook = import_string(hook)
    return bool(hook(request, request.method, request.path))


def via_token(request: HttpRequest) -> bool:
    """Whether this request was let in by the API token rather than a staff session."""
    return bool(getattr(request, TOKEN_ATTRIBUTE, False))


def bearer_ok(request: HttpRequest) -> bool:
    """``Authorization: Bearer <WURK["API_TOKEN"]>``, compared in constant time."""
    token = context.config().api_token
    header = request.headers.get("Authorization", "")
    if not token or not header.startswith("Bearer "):
        return False
    return hmac.compare_digest(header[len("Bearer "):].strip().encode(), str(token).encode())
