"""The HTTP API's settings, read as ``config.http_api_tokens`` (a dict of
:class:`~wurk_django.http_api.tokens.Token` by name) and the ``config.http_api_*`` limits."""

from __future__ import annotations

import re
from typing import Any

from ..conf.setting import Setting
from ..conf.validators import int_at_least, is_int

HTTP_API = "HTTP API"
SCOPES = ("enqueue", "read", "admin")
#: A token's name: part of a Redis key and of a limiter's name.
NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
MIN_TOKEN_LENGTH = 16
INTERVALS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400}


def rate_problem(value: Any) -> str | None:
    """What is wrong with a ``RATE_LIMIT`` value (``None`` when nothing is)."""
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"COUNT", "INTERVAL"} or "COUNT" not in value:
        return f'a rate limit is {{"COUNT": n, "INTERVAL": seconds or "second"/"minute"/"hour"/"day"}}, not {value!r}'
    if not is_int(value["COUNT"], 1):
        return f"a rate limit's COUNT must be an integer >= 1, not {value['COUNT']!r}"
    interval = value.get("INTERVAL", "second")
    if interval not in INTERVALS and not is_int(interval, 1):
        return f'a rate limit\'s INTERVAL must be seconds >= 1 or one of {", ".join(INTERVALS)}, not {interval!r}'
    return None


def token_problems(value: Any) -> list[str]:
    """``HTTP_API_TOKENS``'s own messages (never quoting a token)."""
    if not isinstance(value, dict):
        return [f"must be a dict of name -> {{\"TOKEN\": ..., \"SCOPES\": [...]}}, not a {type(value).__name__}"]
    found: list[str] = []
    seen: dict[str, str] = {}
    for name, entry in value.items():
        if not isinstance(name, str) or not NAME.match(name):
            found.append(f"token name {name!r} must be 1 to 64 letters, digits, '_', '.' or '-'")
            continue
        if not isinstance(entry, dict) or set(entry) - {"TOKEN", "SCOPES", "RATE_LIMIT"}:
            found.append(f"token {name!r} must be a dict with TOKEN, SCOPES and optionally RATE_LIMIT")
            continue
        secret = entry.get("TOKEN")
        if not isinstance(secret, str) or len(secret) < MIN_TOKEN_LENGTH or secret != secret.strip():
            found.append(f"token {name!r}: TOKEN must be a string of {MIN_TOKEN_LENGTH}+ characters without"
                         " surrounding spaces")
        elif secret in seen:
            found.append(f"tokens {seen[secret]!r} and {name!r} have the same TOKEN")
        else:
            seen[secret] = name
        scopes = entry.get("SCOPES")
        if not isinstance(scopes, (list, tuple)) or not scopes:
            found.append(f"token {name!r} has no SCOPES: give one or more of {', '.join(SCOPES)}")
        elif any(scope not in SCOPES for scope in scopes):
            found.append(f"token {name!r}: SCOPES {list(scopes)!r} may hold only {', '.join(SCOPES)}")
        problem = rate_problem(entry.get("RATE_LIMIT"))
        if problem:
            found.append(f"token {name!r}: {problem}")
    return found


def _tokens(value: dict[str, Any]) -> dict[str, Any]:
    if not value:
        return {}  # the default: a process that never serves the API imports none of it
    from .tokens import Token  # lazy: the table is read by every process

    return {name: Token.from_setting(name, entry) for name, entry in value.items()}


def _class_names(value: Any) -> bool:
    return isinstance(value, (list, tuple)) and all(isinstance(v, str) and v and "|" not in v for v in value)


ROWS = (
    Setting("HTTP_API_TOKENS", {},
            lambda v: not token_problems(v), 'a dict of name -> {"TOKEN": ..., "SCOPES": [...]}',
            'Bearer tokens of the HTTP API ([http-api.md](http-api.md)), by name: `{"ci": {"TOKEN": "<16+ characters>", '
            '"SCOPES": ["enqueue", "read"], "RATE_LIMIT": {"COUNT": 100, "INTERVAL": "minute"}}}`. Scopes: '
            '`enqueue` (POST jobs), `read` (GET jobs, queues, processes), `admin` (everything, DELETE included). '
            "Empty: every request is refused (401). Checked by `wurk.E041`.", HTTP_API,
            detail="wurk_django.http_api.settings.token_problems", kind="http_api",
            parse=_tokens, type=dict),
    Setting("HTTP_API_JOB_CLASSES", [],
            _class_names, "a list of job class names",
            "Job classes the HTTP API may enqueue: exact names (a Python job's name, or a class no Python "
            "process defines, e.g. a Ruby worker's) or `prefix.*` for every registered Python job class under "
            "that prefix. Empty: nothing may be enqueued.", HTTP_API,
            parse=tuple, type=tuple),
    Setting("HTTP_API_MAX_BODY_BYTES", 1_048_576,
            *int_at_least(1),
            "Largest request body the HTTP API reads, in bytes; larger gets a 413 problem.", HTTP_API,
            type=int),
    Setting("HTTP_API_MAX_ARGS_BYTES", 65_536,
            *int_at_least(1),
            "Largest `args` plus `kwargs` of one job pushed over HTTP, in bytes of JSON; larger gets a 422 "
            "problem.", HTTP_API,
            type=int),
    Setting("HTTP_API_MAX_BULK", 1000,
            *int_at_least(1),
            "Most jobs one `POST /v1/jobs/bulk` may push.", HTTP_API,
            type=int),
    Setting("HTTP_API_IDEMPOTENCY_TTL", 86_400,
            lambda v: is_int(v, 1), "seconds >= 1",
            "Seconds the HTTP API keeps the first response to an `Idempotency-Key`, replayed to a repeat of "
            "the request.", HTTP_API,
            type=int),
    Setting("HTTP_API_RATE_LIMIT", None,
            lambda v: rate_problem(v) is None, 'None or {"COUNT": n, "INTERVAL": seconds or "minute"...}',
            "Requests each HTTP API token may make per interval (a window limiter per token, "
            "`http_api:<name>`); a token's own `RATE_LIMIT` wins. `None`: no limit.", HTTP_API,
            type=dict | None),
)
