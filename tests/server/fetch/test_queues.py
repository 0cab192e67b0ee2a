"""Queue order for fetching (CORE-101, CORE-102)."""

import random
from collections import Counter

from wurk_django.server.fetch.queues import QueueOrder


def test_strict_order_is_the_declared_order_every_time():
    """PRO-120: per-pass queue order, paused queues dropped."""
    order = QueueOrder([("critical", 0), ("default", 0), ("low", 0), ("default", 0)])
    assert order.mode == "strict"
    assert [order() for _ in range(3)] == [["critical", "default", "low"]] * 3


def test_all_weight_one_is_random_mode():
    """PRO-120: per-pass queue order, paused queues dropped."""
    assert QueueOrder([("a", 1), ("b", 1)]).mode == "random"


def test_weighted_leads_in_proportion_to_weight():
    order = QueueOrder([("critical", 6), ("default", 3), ("low", 1)], rng=random.Random(7))
    assert order.mode == "weighted"
    leaders = Counter(order()[0] for _ in range(10_000))
    assert 0.55 < leaders["critical"] / 10_000 < 0.65
    assert 0.25 < leaders["default"] / 10_000 < 0.35
    assert all(sorted(order()) == ["critical", "default", "low"] for _ in range(50))
    assert order.weights() == {"critical": 6, "default": 3, "low": 1}
