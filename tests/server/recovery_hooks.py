"""A recovery callback named by dotted path in tests/server/test_recovery.py."""

CALLS: list = []


def remember(jobstr, pill):
    CALLS.append((jobstr, pill))
