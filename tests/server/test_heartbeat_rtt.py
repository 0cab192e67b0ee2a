"""The slow round-trip warning looks at the last five beats, whichever five they are."""

from __future__ import annotations

import logging

from wurk_django.server.heartbeat import RTT_WARNING_US, Heartbeat

SLOW = RTT_WARNING_US + 1
FAST = RTT_WARNING_US // 10


def _beat(samples: list[int], caplog) -> list[str]:
    heartbeat = Heartbeat.__new__(Heartbeat)  # only the sample window is exercised
    heartbeat._rtts = []
    with caplog.at_level(logging.WARNING, logger="wurk_django"):
        for sample in samples:
            heartbeat._check_rtt(sample)
    return [r.getMessage() for r in caplog.records if "round trips are slow" in r.getMessage()]


def test_core_153_five_slow_samples_in_a_row_warn_even_across_a_fast_one_before(caplog):
    """CORE-153: the warning fires when the last five samples all exceed 50 ms, a rolling
    window: a fast beat followed by five slow ones warns."""
    assert len(_beat([FAST, SLOW, SLOW, SLOW, SLOW, SLOW], caplog)) == 1


def test_core_153_the_samples_reset_after_a_warning_and_four_slow_do_not_warn(caplog):
    """CORE-153: after a warning the samples start again; four slow beats alone do not warn."""
    assert len(_beat([SLOW] * 5 + [SLOW] * 4, caplog)) == 1
    caplog.clear()
    assert _beat([SLOW, SLOW, FAST, SLOW, SLOW, SLOW, SLOW], caplog) == []
