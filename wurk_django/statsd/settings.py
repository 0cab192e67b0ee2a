"""Statsd's setting: ``WURK["STATSD"]``, read as ``config.statsd``, a :class:`StatsdSettings`
(``None`` when metrics are off)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..conf.setting import FEATURES, Setting
from ..conf.validators import is_int

KEYS = ("HOST", "PORT", "TAGS", "NAMESPACE", "CLIENT", "OPTIONS")


@dataclass(frozen=True)
class StatsdSettings:
    """Where metrics go: a UDP client to ``host:port`` with ``tags`` on every metric and
    names under ``namespace``, or ``client`` (a client, a factory returning one, or its
    dotted path) instead; ``options`` is ``fn(class, job, queue) -> {"tags", "sample_rate"}``
    or its dotted path."""

    host: str = "127.0.0.1"
    port: int = 8125
    tags: tuple[str, ...] = ()
    namespace: str | None = None
    client: Callable[[], Any] | str | None = None
    options: Callable[[str, dict, str], dict] | str | None = None


def is_statsd(v: Any) -> bool:
    if v is None or callable(v) or isinstance(v, str):
        return True
    if not isinstance(v, dict) or set(v) - set(KEYS):
        return False
    port = v.get("PORT", 8125)
    tags = v.get("TAGS", [])
    return (isinstance(v.get("HOST", ""), str) and is_int(port, 1) and port < 65536
            and isinstance(tags, (list, tuple)) and all(isinstance(t, str) for t in tags)
            and all(v.get(k) is None or callable(v[k]) or isinstance(v[k], str) for k in ("CLIENT", "OPTIONS"))
            and (v.get("NAMESPACE") is None or isinstance(v["NAMESPACE"], str)))


def parse(v: Any) -> StatsdSettings | None:
    if v is None:
        return None
    if not isinstance(v, dict):
        return StatsdSettings(client=v)  # a client factory, or its dotted path
    return StatsdSettings(host=v.get("HOST") or "127.0.0.1", port=v.get("PORT") or 8125,
                          tags=tuple(v.get("TAGS") or ()), namespace=v.get("NAMESPACE"),
                          client=v.get("CLIENT") or None, options=v.get("OPTIONS"))


ROWS = (
    Setting("STATSD", None,
            is_statsd, "None, a client factory, or a dict of HOST, PORT (1-65535), TAGS (strings), NAMESPACE, CLIENT,"
            " OPTIONS",
            "Job metrics to statsd/DogStatsD with Sidekiq Pro's names (`sidekiq.jobs.count`, ...): `{\"HOST\":"
            ' "127.0.0.1", "PORT": 8125, "TAGS": ["env:prod"], "NAMESPACE": None}`, or `{"CLIENT":'
            ' "dotted.factory"}` (a callable returning an existing DogStatsD client), plus an optional `"OPTIONS":'
            ' fn(class, job, queue) -> {"tags": [...], "sample_rate": r}`. Sent over non-blocking UDP (dropped,'
            " never waited for). See [operations.md](operations.md).", FEATURES,
            parse=parse, type=StatsdSettings | None),
)
