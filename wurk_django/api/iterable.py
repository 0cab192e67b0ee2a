"""``IterableJobQuery``: progress of iterable jobs by jid (CORE-170, CORE-221)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .. import keys
from ._base import RedisClient, cluster_aware
from .record import read_iteration

__all__ = ["IterableJobQuery"]


class IterableJobQuery:
    """Iteration state for several jids in one round trip.

    Each state is ``{"executions": int, "runtime": float, "cursor": <decoded JSON>,
    "cancelled": int | None}``, or ``None`` when the job has no ``it-<jid>`` hash
    (never started, finished, or expired).
    """

    def __init__(self, jids: Iterable[str], redis: RedisClient | None = None) -> None:
        self.jids = list(jids)
        self._redis = redis
        self._states: dict[str, dict | None] | None = None

    def states(self) -> dict[str, dict | None]:
        """``{jid: state or None}`` in the order the jids were given."""
        if self._states is None:
            if not self.jids:
                self._states = {}
            else:
                # A Redis Cluster's client too (issue 46 item 3): one key per jid, each read alone.
                pipe = cluster_aware(self._redis).pipeline(transaction=False)
                for jid in self.jids:
                    pipe.hgetall(keys.iteration(jid))
                self._states = {jid: read_iteration(fields)
                                for jid, fields in zip(self.jids, pipe.execute(), strict=True)}
        return self._states

    def __getitem__(self, jid: str) -> dict | None:
        return self.states().get(jid)

    def __iter__(self) -> Iterator[tuple[str, dict | None]]:
        return iter(self.states().items())
