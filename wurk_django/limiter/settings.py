"""Rate limiters' settings, read as ``config.limiter_backoff``, ``config.limiter_errors``,
``config.limiter_redis`` (a :class:`LimiterRedis` or ``None``) and ``config.limiter_cap_action``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..conf.setting import LIMITERS, Setting
from ..conf.validators import is_hook, is_int


@dataclass(frozen=True)
class LimiterRedis:
    """A dedicated connection pool for limiter calls: another server (``url``) or the
    main one (``url`` is ``None``), ``pool_size`` connections."""

    url: str | None = None
    pool_size: int = 10


def is_limiter_redis(v: Any) -> bool:
    return v is None or (isinstance(v, dict) and set(v) <= {"URL", "POOL_SIZE"}
                         and (v.get("URL") is None or (isinstance(v["URL"], str) and "://" in v["URL"]))
                         and (v.get("POOL_SIZE") is None or is_int(v["POOL_SIZE"], 1)))


def parse_limiter_redis(v: dict[str, Any] | None) -> LimiterRedis | None:
    if not v:
        return None
    return LimiterRedis(url=v.get("URL") or None, pool_size=int(v.get("POOL_SIZE") or 10))


ROWS = (
    Setting("LIMITER_BACKOFF", None,
            is_hook, "None, a callable or a dotted path",
            "Callable (or dotted path) `(limiter, job, exc) -> seconds`, how long a job that hit a"
            " limit waits before it runs again when its limiter has no `backoff` of its own. `None`: 300 s ×"
            " `overrated` plus 1..300 s; see docs/limiters.md.", LIMITERS,
            type=Callable | str | None),
    # Dotted paths stay strings here: they are imported when a job raises, not when settings are read.
    Setting("LIMITER_ERRORS", [],
            lambda v: isinstance(v, (list, tuple)) and all(isinstance(x, (type, str)) for x in v),
            "a list of exception classes or dotted paths",
            "More exception classes (or dotted paths) a job may raise to be rescheduled like"
            " `limiter.OverLimit` (an HTTP 429 error from a partner API, say); `OverLimit` is always included.",
            LIMITERS,
            parse=tuple, type=tuple),
    Setting("LIMITER_REDIS", None,
            is_limiter_redis,
            'None or {"URL": redis:// URL, "POOL_SIZE": integer >= 1}',
            '`{"URL": ..., "POOL_SIZE": 10}`, a dedicated connection pool for limiter calls;'
            " `None` uses the main pool.", LIMITERS,
            parse=parse_limiter_redis, type=LimiterRedis | None),
    Setting("LIMITER_CAP_ACTION", "dead",
            lambda v: v in ("dead", "retry"), '"dead" or "retry"',
            "A job rate limited as many times as its limiter's `reschedule` cap (default 20)"
            ' goes to the dead set with a `rate_limited:` message (`"dead"`, Ruby wurk) or into the normal'
            ' retries (`"retry"`, Sidekiq Enterprise).', LIMITERS,
            type=str),
)
