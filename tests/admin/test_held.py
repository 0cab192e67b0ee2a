"""The Held page: poison-pill suspects held back, why, and "release now" (issue 42 item 4)."""

from __future__ import annotations

import json

from tests.server.fetch.test_reliable import _dead_pid, _dead_slots
from wurk_django import keys, payload
from wurk_django.server.reaper import Reaper
from wurk_django.server.state import NONCE, hostname

from .conftest import BASE, job


def _held(redis_db, *items: dict, count: int = 1) -> int:
    """A dead process that was running ``items``, each suspected in an earlier crash: held."""
    pid = _dead_pid()
    for item in items:
        redis_db.set(keys.recovered(item["jid"]), count)
    _dead_slots(redis_db, pid, {slot: ([payload.dumps(item)], "*") for slot, item in enumerate(items)})
    redis_db.set(keys.paced("default"), "1")  # nothing goes back on its own during the test
    Reaper(["default"], grace=0).boot_sweep()
    return pid


def test_the_page_lists_held_jobs_with_why_and_masks_arguments(admin_client, redis_db):
    secret = job("PayJob", args=["visible", "c2VjcmV0LWNhcmQ="], encrypt=True, jid="a" * 24)
    plain = job("ReportJob", args=["<b>x</b>"], jid="b" * 24)
    pid = _held(redis_db, secret, plain)
    body = admin_client.get(BASE + "held/").content.decode()
    assert "PayJob" in body and "ReportJob" in body and "a" * 24 in body
    assert "[encrypted data]" in body and "c2VjcmV0LWNhcmQ" not in body
    assert "&lt;b&gt;x&lt;/b&gt;" in body and "<b>x</b>" not in body
    assert f"{hostname()}:{pid}:{NONCE}" in body  # the death it was running in
    assert "Running when 2 processes died" in body
    assert body.count('class="wurk-inline wurk-release"') == 2
    busy = admin_client.get(BASE + "busy/").content.decode()
    assert 'id="wurk-held-link"' in busy and "Poison-pill suspects held back" in busy


def test_release_now_gives_the_job_back_or_buries_a_third_death(admin_client, redis_db):
    innocent = job("ReportJob", jid="c" * 24)
    _held(redis_db, innocent)
    (held,) = [name.decode() for name in redis_db.zrange(keys.HELD_INDEX, 0, -1)]
    response = admin_client.post(BASE + "held/", {"held": held, "jid": "c" * 24}, follow=True)
    assert "is back on its queue" in response.content.decode()
    assert [json.loads(raw)["jid"] for raw in redis_db.lrange("queue:default", 0, -1)] == ["c" * 24]
    assert "No job is held." in admin_client.get(BASE + "held/").content.decode()

    pill = job("PillJob", jid="d" * 24)
    _held(redis_db, pill, count=2)
    (held,) = [name.decode() for name in redis_db.zrange(keys.HELD_INDEX, 0, -1)]
    response = admin_client.post(BASE + "held/", {"held": held, "jid": "d" * 24}, follow=True)
    assert "went to the dead set" in response.content.decode()
    assert [json.loads(raw)["jid"] for raw in redis_db.zrange("dead", 0, -1)] == ["d" * 24]
    again = admin_client.post(BASE + "held/", {"held": held, "jid": "d" * 24}, follow=True)
    assert "is no longer held" in again.content.decode()


def test_a_viewer_sees_no_release_button_and_cannot_post(client, viewer, redis_db):
    _held(redis_db, job("ReportJob", jid="e" * 24))
    client.force_login(viewer)
    body = client.get(BASE + "held/").content.decode()
    assert "e" * 24 in body and "wurk-release" not in body
    (held,) = [name.decode() for name in redis_db.zrange(keys.HELD_INDEX, 0, -1)]
    assert client.post(BASE + "held/", {"held": held, "jid": "e" * 24}).status_code == 403
    assert redis_db.llen(held) == 1
