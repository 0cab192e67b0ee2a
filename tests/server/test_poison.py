"""``on_poison`` registrations (server/poison.py), seen through a real burial of a pill."""

from __future__ import annotations

from wurk_django import payload
from wurk_django.server import poison


def test_on_poison_deduplicates_by_identity_and_remove_is_idempotent(redis_db):
    """PRO-156: registering the same callable twice calls it once per pill, and its handle's
    ``remove()`` may be called again without error; a removed callable is not called."""
    seen = []

    def note(info):
        seen.append(info)

    raw = payload.dumps({"class": "X", "args": [], "jid": "p" * 24, "queue": "default"})
    pill = poison.Pill("p" * 24, "X", 3, "default", raw.decode())
    first = poison.on_poison(note)
    second = poison.on_poison(note)
    try:
        poison.bury_pill(pill, raw)
        assert [info["jid"] for info in seen] == ["p" * 24]
    finally:
        first.remove()
        second.remove()
        first.remove()
    poison.bury_pill(pill, raw)
    assert len(seen) == 1
