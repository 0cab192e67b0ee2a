"""Leader election: one process of the cluster is the leader (Sidekiq Enterprise's ``dear-leader``).

Every worker process campaigns (unless ``WURK_LEADER=false``); ask
:func:`is_leader` before doing work only one process should do. See
docs/periodic.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import context

if TYPE_CHECKING:
    from .election import Leader

__all__ = ["Leader", "current", "is_leader", "leader_info", "opted_out"]


def __getattr__(name: str) -> Any:
    # The election runs on the worker's timer thread: it loads on first use, so a process
    # that only reads settings (which imports leader.settings, and so this package) or
    # pushes jobs does not load the worker engine.
    if name in ("Leader", "opted_out"):
        from . import election

        return getattr(election, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

_current: Leader | None = None


def current() -> Leader | None:
    """The campaigning :class:`Leader` of this process, if it runs a worker."""
    return _current


def set_current(leader: Leader | None) -> None:
    global _current
    _current = leader


def is_leader() -> bool:
    """Whether this process leads the cluster (cached up to 5 seconds; False on a Redis
    error, in opted-out processes and in processes that run no worker)."""
    leader = _current
    return leader.is_leader() if leader is not None else False


def leader_info(redis: Any = None) -> dict[str, Any]:
    """``{"identity", "since", "token"}`` of the cluster's leader now; ``identity`` is
    ``""`` when nobody leads, ``since``/``token`` are None when unknown (a Ruby leader)."""

    from ..redis.cluster_layout import layout_of  # here: reading settings imports this package

    redis = context.redis(redis)
    where = layout_of(redis)
    pipe = redis.pipeline(transaction=False)
    pipe.get(where.leader)
    pipe.hgetall(where.leader_info)
    current_id, info = pipe.execute()
    identity = current_id.decode() if isinstance(current_id, bytes) else (current_id or "")
    info = {k.decode() if isinstance(k, bytes) else k: v.decode() if isinstance(v, bytes) else v
            for k, v in (info or {}).items()}
    same_term = bool(identity) and info.get("identity") == identity
    return {
        "identity": identity,
        "since": _number(info.get("since"), float) if same_term else None,
        "token": _number(info.get("token"), int) if same_term else None,
    }


def _number(value: Any, kind: type) -> Any:
    try:
        return kind(value) if value else None
    except ValueError:
        return None
