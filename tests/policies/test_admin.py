"""The admin's Policies page (issue 47 item 3): pending debounced jobs with their key, first push,
cap and fire time, "Fire now" and "Drop" asking first; throttled classes with the current slot
and the pushes dropped (counted on the drop path only). And deadlines (item 5) on the job pages."""

from __future__ import annotations

import json
import time

import pytest

from tests.admin.conftest import BASE, heartbeat, job, make_user
from tests.admin.test_destructive_actions import check_page
from tests.jobsapp.policy_jobs import PerUser, Ping, SlowBurst
from wurk_django import keys, payload

pytestmark = pytest.mark.django_db

PAGE = BASE + "policies/"


def _schedule(redis_db) -> list[dict]:
    return [json.loads(raw) for raw in redis_db.zrange("schedule", 0, -1)]


def test_pending_debounced_jobs_are_listed_with_key_first_push_cap_and_fire_time(admin_client, redis_db):
    before = time.time()
    for version in (1, 2, 3):
        SlowBurst.perform_async(version)
    PerUser.perform_async(7, 1)
    # A plain scheduled job is not listed.
    redis_db.zadd("schedule", {payload.dumps(job("ReportJob", jid="p" * 24)): time.time() + 60})
    response = admin_client.get(PAGE)
    assert response.status_code == 200
    rows = {row["klass"]: row for row in response.context["debounced"]}
    assert set(rows) == {SlowBurst.job_name, PerUser.job_name}
    slow = rows[SlowBurst.job_name]
    assert slow["args"] == "3" and slow["quiet"] == 30 and slow["max_wait"] == 40
    assert before - 1 <= slow["first"].timestamp() <= time.time()
    assert slow["cap"].timestamp() == pytest.approx(slow["first"].timestamp() + 40)
    assert slow["fires"].timestamp() == pytest.approx(slow["last"].timestamp() + 30)
    assert rows[PerUser.job_name]["policy_key"] == "7"
    html = response.content.decode()
    assert "Debounced jobs waiting to fire" in html and "Fire now" in html and "Drop for good" in html
    assert not check_page(html, "policies/")


def test_fire_now_queues_the_pending_job_and_the_next_push_starts_a_new_burst(admin_client, redis_db):
    SlowBurst.perform_async(1)
    [row] = admin_client.get(PAGE).context["debounced"]
    response = admin_client.post(PAGE, {"action": "fire", "key": row["key"]})
    assert response.status_code == 302
    [queued] = [json.loads(raw) for raw in redis_db.lrange("queue:default", 0, -1)]
    assert queued["jid"] == row["jid"] and queued["args"] == [1]
    assert redis_db.zcard("schedule") == 0  # put on its queue, not debounced again
    assert admin_client.get(PAGE).context["debounced"] == []
    SlowBurst.perform_async(2)
    [pending] = _schedule(redis_db)
    assert pending["args"] == [2]
    [row] = admin_client.get(PAGE).context["debounced"]
    assert row["first"].timestamp() == pytest.approx(pending["debounced_at"], abs=0.01)  # a new burst


def test_drop_deletes_it_and_a_stale_key_changes_nothing(admin_client, redis_db):
    SlowBurst.perform_async(1)
    [row] = admin_client.get(PAGE).context["debounced"]
    SlowBurst.perform_async(2)  # a later push took its place: the old key is stale
    response = admin_client.post(PAGE, {"action": "drop", "key": row["key"]}, follow=True)
    assert "no longer pending" in response.content.decode()
    [pending] = _schedule(redis_db)
    assert pending["args"] == [2]
    [row] = admin_client.get(PAGE).context["debounced"]
    admin_client.post(PAGE, {"action": "drop", "key": row["key"]})
    assert redis_db.zcard("schedule") == 0 and redis_db.llen("queue:default") == 0
    assert admin_client.get(PAGE).context["debounced"] == []


def test_a_viewer_sees_the_page_but_cannot_act(client, redis_db):
    client.force_login(make_user("viewer", perms=("view_dashboard",)))
    SlowBurst.perform_async(1)
    response = client.get(PAGE)
    assert response.status_code == 200 and 'value="fire"' not in response.content.decode()
    [row] = response.context["debounced"]
    assert client.post(PAGE, {"action": "drop", "key": row["key"]}).status_code == 403
    assert redis_db.zcard("schedule") == 1


def test_throttled_classes_show_the_current_slot_and_count_only_dropped_pushes(admin_client, redis_db):
    first = Ping.perform_async(1)
    assert first and redis_db.exists(keys.THROTTLE_DROPS) == 0  # an admitted push writes no counter
    assert Ping.perform_async(2) is None and Ping.perform_async(3) is None
    response = admin_client.get(PAGE)
    rows = {row["klass"]: row for row in response.context["throttled"]}
    ping = rows[Ping.job_name]
    assert ping["dropped"] == 2 and ping["holder"] == first and ping["period"] == 60
    assert ping["slot_start"].timestamp() <= time.time() < ping["slot_end"].timestamp()
    assert "Throttled classes" in response.content.decode()


def test_deadlines_show_on_the_set_and_busy_pages(admin_client, redis_db):
    at = 4_102_444_800.0  # 2100-01-01
    scheduled = job("ReportJob", jid="d" * 24)
    scheduled["deadline"] = at
    score = time.time() + 60
    redis_db.zadd("schedule", {payload.dumps(scheduled): score})
    html = admin_client.get(BASE + "scheduled/").content.decode()
    assert "wurk-deadline" in html and "2100-01-01 00:00:00" in html
    page = admin_client.get(BASE + f"scheduled/job/{payload.score(score)}-{'d' * 24}/").content.decode()
    assert "4102444800.0  (2100-01-01 00:00:00 UTC)" in page
    heartbeat(redis_db, busy=1, work={"t1x": scheduled})
    assert "2100-01-01 00:00:00" in admin_client.get(BASE + "busy/").content.decode()
    assert "wurk-deadline" not in admin_client.get(BASE + "retries/").content.decode()


def test_the_debounce_index_prunes_entries_long_due_at_each_debounced_push(redis_db):
    redis_db.zadd(keys.DEBOUNCES, {"debounce:gone": time.time() - 7200, "debounce:recent": time.time() - 60})
    SlowBurst.perform_async(1)
    left = [member.decode() for member in redis_db.zrange(keys.DEBOUNCES, 0, -1)]
    assert "debounce:gone" not in left and "debounce:recent" in left and len(left) == 2
