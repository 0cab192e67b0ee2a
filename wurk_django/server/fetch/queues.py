"""The order a fetcher tries its queues in (CORE-101, CORE-102)."""

from __future__ import annotations

import random


class QueueOrder:
    """``strict``: the declared order, every time. ``weighted``/``random``: a fresh
    shuffle of the weight-expanded list per fetch, so a queue leads with
    probability weight / total."""

    def __init__(self, queues: list[tuple[str, int]], rng: random.Random | None = None) -> None:
        weights = {w for _, w in queues}
        self.mode = "strict" if weights == {0} else "random" if weights == {1} else "weighted"
        self.names = list(dict.fromkeys(name for name, _ in queues))
        self._expanded = [name for name, weight in queues for _ in range(max(weight, 1))]
        self._rng = rng or random.Random()

    def __call__(self) -> list[str]:
        if self.mode == "strict":
            return self.names
        expanded = list(self._expanded)
        self._rng.shuffle(expanded)
        return list(dict.fromkeys(expanded))

    def weights(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name in self._expanded:
            out[name] = out.get(name, 0) + 1
        return out if self.mode != "strict" else {name: 0 for name in self.names}
