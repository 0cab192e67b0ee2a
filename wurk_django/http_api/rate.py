"""The per-token rate limit of the HTTP API, on the project's own limiter
(:mod:`wurk_django.limiter`): a window limiter ``http_api:<token name>`` per token, shared
by every web process on the Redis, listed on the dashboard's Limiters page like any other.

A request over the limit is refused at once (the limiter's ``policy="ignore"`` with no
wait) with a 429 problem and a ``Retry-After`` of when the oldest request leaves the window.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

from .. import context
from .problems import Problem
from .tokens import Token

_lock = threading.Lock()
#: (token name, count, interval) -> its limiter, built once per process.
_limiters: dict[tuple[str, int, Any], Any] = {}


def _limiter(name: str, count: int, interval: Any) -> Any:
    from .. import limiter

    key = (name, count, interval)
    with _lock:
        found = _limiters.get(key)
        if found is None:
            found = _limiters[key] = limiter.window(f"http_api:{name}", count, interval, wait_timeout=0,
                                                    policy="ignore")
        return found


def rule_for(token: Token) -> dict[str, Any] | None:
    """The token's own ``RATE_LIMIT``, else ``HTTP_API_RATE_LIMIT``; ``None``: no limit."""
    return token.rate_limit if token.rate_limit is not None else context.config().http_api_rate_limit


def check(token: Token) -> None:
    """Count one request of ``token``; :class:`Problem` ``rate-limited`` when over its limit."""
    rule = rule_for(token)
    if rule is None:
        return
    window = _limiter(token.name, rule["COUNT"], rule.get("INTERVAL", "second"))
    with window.acquire() as held:
        if held.acquired:
            return
    reset_at = window.status().get("reset_at")
    wait = max(1, math.ceil(reset_at - time.time())) if reset_at else 1
    raise Problem("rate-limited", f"token {token.name!r} may make {rule['COUNT']} requests per "
                                  f"{rule.get('INTERVAL', 'second')}", headers={"Retry-After": str(wait)})
